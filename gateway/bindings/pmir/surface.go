package pmir

import (
	"context"
	"reflect"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// Surface is the feed's part of the server: the feed route on the data plane (behind
// the readiness gate, with its own token check), and the subscription's process,
// stopped in drain step 4 under the name identity_registry. Nil without a feed.
func (f *Feed) Surface() bindings.Surface {
	if f == nil {
		return nil
	}
	s := &surface{ProcessSurface: bindings.NewProcessSurface(Key, f), f: f}
	s.StopReportFunc = f.StopReport
	if f.export && f.metrics != nil {
		return metricsSurface{s}
	}
	return s
}

type surface struct {
	*bindings.ProcessSurface
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

// StopBefore makes the feed stop before each process surface of ss (the audit
// trail's destinations): drain step 4 stops every surface at once, and the spool
// closing beside the subscription's delete would refuse the delete's audit record.
// Each waits for the feed's Stop to return, for at most half of what is left of the
// bindings budget, then stops. Other surfaces, and all of them without a feed, are
// returned as they are.
func (f *Feed) StopBefore(ss []bindings.Surface) []bindings.Surface {
	if f == nil {
		return ss
	}
	out := make([]bindings.Surface, 0, len(ss))
	for _, s := range ss {
		if ps, ok := s.(*bindings.ProcessSurface); ok {
			out = append(out, stopAfter{ProcessSurface: ps, first: f.stopped})
			continue
		}
		out = append(out, s)
	}
	return out
}

// stopAfter is a process surface that stops once first is closed.
type stopAfter struct {
	*bindings.ProcessSurface
	first <-chan struct{}
}

// Stop waits for first, at most half of what is left of ctx, then stops the process.
func (s stopAfter) Stop(ctx context.Context) error {
	wait := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	select {
	case <-s.first:
	case <-wait.Done():
	}
	return s.ProcessSurface.Stop(ctx)
}
