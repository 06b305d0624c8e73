//go:build linux && (amd64 || arm64)

package process

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// A kernel without IPv6 (booted with ipv6.disable=1) refuses every AF_INET6 socket with
// EAFNOSUPPORT. The launcher makes exactly that true of one process: the test binary,
// run with noIPv6Env set, installs a seccomp filter that fails socket(AF_INET6, ...)
// so, then execs the command in its arguments, which inherits the filter.
const noIPv6Env = "FERROFED_TEST_EXEC_WITHOUT_IPV6"

func init() { beforeTests = launchWithoutIPv6 }

// socketSyscall is socket(2)'s number on this architecture.
var socketSyscall = map[string]uint32{"amd64": 41, "arm64": 198}[runtime.GOARCH]

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type sockFprog struct {
	len    uint16
	filter *sockFilter
}

func launchWithoutIPv6() {
	if os.Getenv(noIPv6Env) == "" {
		return
	}
	args := os.Args[1:]
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "launcher without IPv6: %v\n", err)
		os.Exit(111)
	}
	if len(args) == 0 {
		fail(fmt.Errorf("no command"))
	}
	const (
		ldAbsW     = 0x20 // BPF_LD | BPF_W | BPF_ABS
		jeqK       = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
		retK       = 0x06 // BPF_RET | BPF_K
		retAllow   = 0x7fff0000
		retErrno   = 0x00050000
		nrOffset   = 0  // seccomp_data.nr
		arg0Offset = 16 // seccomp_data.args[0], its low 32 bits (little-endian)
	)
	prog := []sockFilter{
		{code: ldAbsW, k: nrOffset},
		{code: jeqK, jt: 0, jf: 3, k: socketSyscall},
		{code: ldAbsW, k: arg0Offset},
		{code: jeqK, jt: 0, jf: 1, k: syscall.AF_INET6},
		{code: retK, k: retErrno | uint32(syscall.EAFNOSUPPORT)},
		{code: retK, k: retAllow},
	}
	const prSetNoNewPrivs, prSetSeccomp, seccompModeFilter = 38, 22, 2 // <linux/prctl.h>, <linux/seccomp.h>
	// The filter and no_new_privs are the calling thread's; exec from that thread.
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		fail(fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", errno))
	}
	fprog := sockFprog{len: uint16(len(prog)), filter: &prog[0]}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		fail(fmt.Errorf("prctl(PR_SET_SECCOMP): %w", errno))
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, noIPv6Env+"=") {
			env = append(env, kv)
		}
	}
	fail(syscall.Exec(args[0], args, env))
}

// withoutIPv6 is cmd run as on a kernel without IPv6.
func withoutIPv6(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), noIPv6Env+"=1")
	return cmd
}

// On a kernel without IPv6 the gateway still starts, on IPv4 alone, and the healthcheck
// reaches it: with the dual-stack wildcard ":<port>" (the default, and what the operator
// renders), and with the two other wildcard spellings too, which Go's net.Listen treats
// the same way ("[::]" resolves to 0.0.0.0 first).
func TestServeStartsOnAKernelWithoutIPv6(t *testing.T) {
	dir := t.TempDir()
	for i, listen := range []string{":%d", "0.0.0.0:%d", "[::]:%d"} {
		t.Run(strings.ReplaceAll(listen, "%d", "port"), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("ferrofed-%d.toml", i))
			port := dualStackPort(t)
			writeFile(t, path, fmt.Sprintf("[server]\nlisten = %q\ntermination_message_path = \"\"\n", fmt.Sprintf(listen, port)))
			g := serveCommand(t, withoutIPv6(t, binary, "serve", "--config", path))

			c := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}
			resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
			if err != nil {
				t.Fatalf("IPv4: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("IPv4: %d", resp.StatusCode)
			}
			// Without IPv6 the listener is an IPv4 socket: [::1] is refused. This machine
			// has an IPv6 loopback, so the refusal shows the launcher took IPv6 away.
			if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
				t.Logf("no IPv6 loopback on this machine (%v): the launcher's effect is not checked", err)
			} else {
				ln.Close()
				if conn, err := net.DialTimeout("tcp", fmt.Sprintf("[::1]:%d", port), time.Second); err == nil {
					conn.Close()
					t.Fatal("the gateway answered on [::1]: the launcher left it IPv6")
				}
			}
			if code, out := healthcheck(t, path); code != 0 {
				t.Fatalf("healthcheck exited %d: %s", code, out)
			}
			g.stop(t)
		})
	}
}
