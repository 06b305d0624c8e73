package pmir

import (
	"context"
	"reflect"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// The feed's part of the server, registered by the composition root: the feed route on
// the data plane (behind the readiness gate, with its own token check), its reload
// hook, and the subscription's process (Stop, StopReport), stopped in drain step 4
// under the name identity_registry (Key).

// RegisterDataPlane registers POST {base}/pmir/$process-message.
func (f *Feed) RegisterDataPlane(g *gin.RouterGroup) {
	g.POST(config.PMIRFeedPath, f.receive)
}

// PrepareReload says that a changed [pmir] needs a restart: the subscription is held
// for the table the gateway started with. It never refuses a reload.
func (f *Feed) PrepareReload(cfg *config.Config) (func(), error) {
	var next config.PMIR
	if cfg.PMIR != nil {
		next = *cfg.PMIR
	}
	if !reflect.DeepEqual(next, f.cfg) {
		f.log.Info("Configuration changed but needs a restart: pmir", "key", "pmir")
	}
	return func() {}, nil
}

// StopBefore makes the feed stop before each of ss (the audit trail's destinations):
// drain step 4 stops every process at once, and the spool closing beside the
// subscription's delete would refuse the delete's audit record. Each waits for the
// feed's Stop to return, for at most half of what is left of the bindings budget,
// then stops.
func (f *Feed) StopBefore(ss []bindings.Stopper) []bindings.Stopper {
	out := make([]bindings.Stopper, 0, len(ss))
	for _, s := range ss {
		stop := s.Stop
		s.Stop = func(ctx context.Context) error { return stopAfter(ctx, f.stopped, stop) }
		out = append(out, s)
	}
	return out
}

// stopAfter waits for first, at most half of what is left of ctx, then stops.
func stopAfter(ctx context.Context, first <-chan struct{}, stop func(context.Context) error) error {
	wait := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	select {
	case <-first:
	case <-wait.Done():
	}
	return stop(ctx)
}
