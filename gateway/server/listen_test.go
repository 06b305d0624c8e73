package server

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// hasIPv6Loopback reports whether this machine can listen on [::1]; the IPv6 half of a
// dual-stack test needs it and is left out, said in the test's log, only without it.
func hasIPv6Loopback(t *testing.T) bool {
	t.Helper()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Logf("no IPv6 loopback on this machine (%v): the [::1] half is not checked", err)
		return false
	}
	ln.Close()
	return true
}

// The default listen, ":<port>", is every interface in both address families: the
// gateway answers on 127.0.0.1 and on [::1]. So are the two other wildcard spellings,
// which Go's net.Listen treats the same way (config.Server.Listen says so).
func TestTheWildcardListenIsDualStack(t *testing.T) {
	if _, port, _ := net.SplitHostPort(config.DefaultListen); config.DefaultListen != ":"+port {
		t.Fatalf("config.DefaultListen is %q, want the dual-stack \":<port>\"", config.DefaultListen)
	}
	ipv6 := hasIPv6Loopback(t)
	for _, listen := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		t.Run(listen, func(t *testing.T) {
			s, err := New(parse(t, "[server]\nlisten = \""+listen+"\"\n"), logr.Discard(), WithBootPoll(5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Listen(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("Run: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Error("Run did not return")
				}
			})
			port := strconv.Itoa(s.Addr().(*net.TCPAddr).Port)
			hosts := []string{"127.0.0.1"}
			if ipv6 {
				hosts = append(hosts, "::1")
			}
			c := newClient()
			for _, h := range hosts {
				base := "http://" + net.JoinHostPort(h, port)
				if a := call(c, base+"/health"); a.err != nil || a.code != 200 {
					t.Fatalf("GET %s/health: %+v", base, a)
				}
				r := &running{url: base}
				r.waitReady(t)
				t.Logf("listen %q answered on %s", listen, base)
			}
		})
	}
}
