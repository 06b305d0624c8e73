package controllers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkPoll is one poll of a pod (readiness and report on one connection, a token
// signed for it) against a loopback server that answers as a gateway would: what each
// poll costs the operator in CPU and garbage (docs/operator.md, "The operator's
// memory").
func BenchmarkPoll(b *testing.B) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/health/readiness" {
			_, _ = w.Write([]byte(`{"status":"ready","phase":"serving"}`))
			return
		}
		_, _ = w.Write([]byte(`{"endpoints":{"a-query":"up","b-query":"up","c-query":"up"},"consent":"up","audit_repository":"up"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	is, err := NewIssuerForTest()
	if err != nil {
		b.Fatal(err)
	}
	p := &DependencyPoller{Issuer: is, Interval: time.Minute}
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	if _, err := strconv.Atoi(port); err != nil {
		b.Fatal(err)
	}
	t := pollTarget{gateway: types.NamespacedName{Namespace: "ns", Name: "gw"}, pod: "gw-0", base: "http://" + net.JoinHostPort(host, port)}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if r := p.poll(context.Background(), t); r.states == nil || r.phase != "serving" {
			b.Fatalf("the poll read no report or phase: %+v", r)
		}
		n++
	}
	// One connection per poll: its two calls share it, and the next poll makes its own.
	if got := conns.Load(); got != int64(n) {
		b.Errorf("%d connections for %d polls, want one each", got, n)
	}
}
