package server

import (
	"context"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/health"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// surface is what the tests' fake parts implement; withSurfaces registers each as the
// composition root registers a real part, one hook per method.
type surface interface {
	RegisterDataPlane(g *gin.RouterGroup)
	RegisterOperator(g *gin.RouterGroup)
	Checks() []health.Check
	Stop(ctx context.Context) error
	Name() string
}

func withSurfaces(ss ...surface) Option {
	rs := make([]Registration, 0, len(ss))
	for _, sf := range ss {
		r := Registration{Name: sf.Name(), DataPlane: sf.RegisterDataPlane, Operator: sf.RegisterOperator, Checks: sf.Checks(), Stop: sf.Stop}
		if x, ok := sf.(interface {
			PrepareReload(*config.Config) (func(), error)
		}); ok {
			r.Reload = x.PrepareReload
		}
		if x, ok := sf.(interface{ StopReport() []any }); ok {
			r.StopReport = x.StopReport
		}
		if x, ok := sf.(interface{ AuditSpools() []lifecycle.SpoolLeft }); ok {
			r.AuditSpools = x.AuditSpools
		}
		if x, ok := sf.(interface{ Collector() prometheus.Collector }); ok {
			r.Collectors = []prometheus.Collector{x.Collector()}
		}
		rs = append(rs, r)
	}
	return WithRegistrations(rs...)
}
