package healthcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
)

func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	// These tests build no access guard (gateway/access is the composition root's
	// part), so their data plane is written open and needs no issuer.
	cfg, err := config.Parse([]byte(text+"\n[auth]\ndata_plane = \"open\"\n"), "test.toml", config.Options{SkipFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestTargetFor(t *testing.T) {
	tests := []struct {
		name, toml, want string
	}{
		{"the default, dual-stack, asks 127.0.0.1", "", "http://127.0.0.1:8080/health/readiness"},
		{"an IPv4 wildcard asks 127.0.0.1", "[server]\nlisten = \"0.0.0.0:9000\"\n", "http://127.0.0.1:9000/health/readiness"},
		{"an empty host asks 127.0.0.1", "[server]\nlisten = \":9000\"\n", "http://127.0.0.1:9000/health/readiness"},
		{"an IPv6 wildcard asks 127.0.0.1, which answers with or without IPv6", "[server]\nlisten = \"[::]:9000\"\n", "http://127.0.0.1:9000/health/readiness"},
		{"an IPv6 wildcard in full asks 127.0.0.1", "[server]\nlisten = \"[0:0:0:0:0:0:0:0]:9000\"\n", "http://127.0.0.1:9000/health/readiness"},
		{"an IPv6 loopback is asked itself", "[server]\nlisten = \"[::1]:9000\"\n", "http://[::1]:9000/health/readiness"},
		{"a named host is asked itself", "[server]\nlisten = \"10.1.2.3:9000\"\n", "http://10.1.2.3:9000/health/readiness"},
		{"an IPv6 host keeps its brackets", "[server]\nlisten = \"[fd00::1]:9000\"\n", "http://[fd00::1]:9000/health/readiness"},
		{"the base path prefixes the route", "[server]\nbase_path = \"/gw\"\n", "http://127.0.0.1:8080/gw/health/readiness"},
		{"tls asks over https", "[server.tls]\ncertificate_file = \"c.pem\"\nkey_file = \"k.pem\"\n", "https://127.0.0.1:8080/health/readiness"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TargetFor(parse(t, tt.toml))
			if err != nil || got.URL != tt.want {
				t.Fatalf("got %q, %v; want %q", got.URL, err, tt.want)
			}
		})
	}
}

// serverAt starts h on a loopback port and returns a configuration pointing at it.
func serverAt(t *testing.T, h http.HandlerFunc) *config.Config {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	return parse(t, "[server]\nlisten = \"0.0.0.0:"+port+"\"\n")
}

// A gateway listening on ":<port>" (every interface, both families) is reached.
func TestRunReachesAGatewayListeningOnTheDualStackWildcard(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ready","phase":"serving"}`))
	}))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	cfg := parse(t, "[server]\nlisten = \":"+port+"\"\n")
	if res := Run(context.Background(), cfg); !res.Ready || !strings.Contains(res.Line, "http://127.0.0.1:"+port+"/health/readiness: 200") {
		t.Fatalf("%+v", res)
	}
}

func TestRun(t *testing.T) {
	t.Run("200 is ready", func(t *testing.T) {
		cfg := serverAt(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/health/readiness" {
				w.WriteHeader(404)
				return
			}
			_, _ = w.Write([]byte(`{"status":"ready","phase":"serving"}` + "\n"))
		})
		res := Run(context.Background(), cfg)
		if !res.Ready || strings.Contains(res.Line, "\n") || !strings.HasPrefix(res.Line, "ready: ") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("503 is unready", func(t *testing.T) {
		cfg := serverAt(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
		if res := Run(context.Background(), cfg); res.Ready || !strings.Contains(res.Line, "503") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("a redirect is unready", func(t *testing.T) {
		cfg := serverAt(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) })
		if res := Run(context.Background(), cfg); res.Ready {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("a refused connection is unready", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		if res := Run(context.Background(), parse(t, "[server]\nlisten = \""+addr+"\"\n")); res.Ready {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("no answer in time is unready", func(t *testing.T) {
		release := make(chan struct{})
		cfg := serverAt(t, func(w http.ResponseWriter, r *http.Request) { <-release })
		defer close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		begin := time.Now()
		res := Run(ctx, cfg)
		if res.Ready || !strings.Contains(res.Line, "no answer in time") || time.Since(begin) > 2*time.Second {
			t.Fatalf("%+v after %s", res, time.Since(begin))
		}
	})
}

func TestOptionsBoundTheTimeout(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		ok      bool
	}{
		{"unset is the default", 0, true},
		{"one millisecond", time.Millisecond, true},
		{"under a millisecond", time.Microsecond, false},
		{"negative", -time.Second, false},
		{"one minute", time.Minute, true},
		{"over a minute", time.Minute + time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Options{Timeout: tt.timeout}.Validate()
			if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "--timeout")) {
				t.Fatalf("Validate(%s) = %v, want ok=%v and the flag named", tt.timeout, err, tt.ok)
			}
		})
	}
}

func TestLivenessAsksHealth(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	cfg := serverAt(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/health" {
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable) // not ready: liveness must not care
	})
	if res := Check(context.Background(), cfg, Options{Liveness: true}); !res.Ready || !strings.HasPrefix(res.Line, "live: ") || !strings.Contains(res.Line, "/health: 200") {
		t.Fatalf("liveness: %+v", res)
	}
	if res := Check(context.Background(), cfg, Options{}); res.Ready || !strings.HasPrefix(res.Line, "unready: ") {
		t.Fatalf("readiness: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != "/health" || asked[1] != "/health/readiness" {
		t.Fatalf("asked %q, want /health then /health/readiness", asked)
	}
	if res := Check(context.Background(), cfg, Options{Liveness: true, Timeout: -1}); res.Ready || !strings.HasPrefix(res.Line, "not live: --timeout") {
		t.Fatalf("a negative timeout: %+v", res)
	}
}

func TestTheTimeoutOptionCutsTheCheck(t *testing.T) {
	release := make(chan struct{})
	cfg := serverAt(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	begin := time.Now()
	res := Check(context.Background(), cfg, Options{Liveness: true, Timeout: 150 * time.Millisecond})
	// Well under the 3 s default: the option, not the default, ended it.
	if took := time.Since(begin); res.Ready || !strings.Contains(res.Line, "no answer in time") || took >= Timeout {
		t.Fatalf("%+v after %s", res, took)
	}
}
