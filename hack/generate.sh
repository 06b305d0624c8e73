#!/usr/bin/env bash
# Regenerates every generated file. Each generator appends itself here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
