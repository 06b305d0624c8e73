//go:build !linux

package spool

import "os"

// datasync is fsync where fdatasync is not to be had.
func datasync(f *os.File) error { return f.Sync() }
