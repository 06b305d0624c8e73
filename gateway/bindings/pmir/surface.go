package pmir

import (
	"reflect"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	binding "github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// Surface is the feed's part of the server: the feed route on the data plane (behind
// the readiness gate, with its own token check), and the subscription's process,
// stopped in drain step 4 under the name identity_registry. Nil without a feed.
func (f *Feed) Surface() binding.Surface {
	if f == nil {
		return nil
	}
	s := &surface{ProcessSurface: binding.NewProcessSurface(Key, f), f: f}
	s.StopReportFunc = f.StopReport
	if f.export && f.metrics != nil {
		return metricsSurface{s}
	}
	return s
}

type surface struct {
	*binding.ProcessSurface
	f *Feed
}

// RegisterDataPlane registers POST {base}/pmir/$process-message.
func (s *surface) RegisterDataPlane(g *gin.RouterGroup) {
	g.POST(config.PMIRFeedPath, s.f.receive)
}

// PrepareReload says that a changed [pmir] needs a restart: the subscription is held
// for the table the gateway started with. It never refuses a reload.
func (s *surface) PrepareReload(cfg *config.Config) (func(), error) {
	var next config.PMIR
	if cfg.PMIR != nil {
		next = *cfg.PMIR
	}
	if !reflect.DeepEqual(next, s.f.cfg) {
		s.f.log.Info("Configuration changed but needs a restart: pmir", "key", "pmir")
	}
	return func() {}, nil
}

// metricsSurface also registers the bindings' metrics, when no other binding does.
type metricsSurface struct{ *surface }

// Collector is the bindings' metrics.
func (s metricsSurface) Collector() prometheus.Collector { return s.f.metrics }
