//go:build unix

package config

import "syscall"

// writable reports whether the process may create entries in the directory dir.
func writable(dir string) error {
	const wOK, xOK = 0x2, 0x1
	return syscall.Access(dir, wOK|xOK)
}
