#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
exec "${AGG_BUILD:-$(dirname "$0")/../build}/t/sparse"
