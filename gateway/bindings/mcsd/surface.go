package mcsd

import (
	"reflect"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// Surface is the directory's part of the server: its refresh loop, stopped in drain
// step 4 (named "directory"), and a reload's configuration, which later candidates
// are checked against. With metrics set it also exports the bindings' metrics (when
// no other binding does).
func (d *Directory) Surface(metrics *bindings.Metrics) bindings.Surface {
	s := &surface{ProcessSurface: bindings.NewProcessSurface(Key, d), d: d}
	if metrics != nil {
		return collectingSurface{surface: s, m: metrics}
	}
	return s
}

type surface struct {
	*bindings.ProcessSurface
	d *Directory
}

// PrepareReload keeps cfg for the next candidates. The table's own keys are read at
// start: a reload that changes them is logged as needing a restart.
func (s *surface) PrepareReload(cfg *config.Config) (func(), error) {
	return func() {
		if !reflect.DeepEqual(cfg.Registry.MCSD, s.d.table) {
			s.d.log.Info("A change of [registry.mcsd] needs a restart; the directory is read as at start")
		}
		s.d.UseConfig(cfg)
	}, nil
}

type collectingSurface struct {
	*surface
	m *bindings.Metrics
}

// Collector is the bindings' metrics.
func (s collectingSurface) Collector() prometheus.Collector { return s.m }
