// Package mount serves a gateway's parts on loopback as the server mounts them (the
// base path, the operator group, the data plane under the request deadline and the
// parts' guards) but without the server: no readiness gate, no bounds, no probes;
// gatewaytest.Mounted mounts the parts assemble built with it (docs/architecture.md,
// "The parts"). It imports no part of the gateway but the server's registration.
package mount

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/server"
)

// Serve mounts parts under cfg's base path on a loopback server and returns it; the
// test's end closes it and stops each part (drain step 4) within 5 s.
func Serve(t testing.TB, cfg *config.Config, parts ...server.Registration) *httptest.Server {
	t.Helper()
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.ContextWithFallback = true
	b := e.Group(cfg.Server.BasePath)
	deadline := func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), cfg.Lifecycle().RequestTimeout)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
	data := []gin.HandlerFunc{deadline}
	for _, p := range parts {
		if p.Guard != nil {
			data = append(data, p.Guard)
		}
	}
	for _, p := range parts {
		if p.Operator != nil {
			p.Operator(b.Group("/operator"))
		}
		if p.DataPlane != nil {
			p.DataPlane(b.Group("", data...))
		}
	}
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, p := range parts {
			if p.Stop == nil {
				continue
			}
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stopping part %s: %v", p.Name, err)
			}
		}
	})
	return hs
}
