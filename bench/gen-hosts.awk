# SPDX-License-Identifier: GPL-2.0-only
# Random hosts in the style of ALEPH Sec. 6.4: bandwidth ratio ~ N(0.5, sd)
# clipped to [0.1, 0.9] x 10 Gbit/s, one PS.
# awk -v n=WORKERS -v racks=R -v sd=0.2 -v seed=1 -f gen-hosts.awk

function normal() { return sqrt(-2*log(1-rand()))*cos(6.283185307179586*rand()) }
BEGIN { srand(seed); print "ps0 10.90.255.254 bw=100 role=ps";
  for (i = 0; i < n; i++) { r = 0.5 + sd*normal(); if (r < 0.1) r = 0.1; if (r > 0.9) r = 0.9;
    printf "w%d 10.90.%d.%d bw=%.3f", i, int(i/250), i%250+1, r*10;
    if (racks) printf " rack=r%d", i % racks; printf "\n" } }
