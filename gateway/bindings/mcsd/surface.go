package mcsd

import (
	"reflect"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// The directory's part of the server, registered by the composition root: its refresh
// loop, stopped in drain step 4 (Stop, named "directory"), and a reload's
// configuration, which later candidates are checked against (PrepareReload).

// PrepareReload keeps cfg for the next candidates. The table's own keys are read at
// start: a reload that changes them is logged as needing a restart.
func (d *Directory) PrepareReload(cfg *config.Config) (func(), error) {
	return func() {
		if !reflect.DeepEqual(cfg.Registry.MCSD, d.table) {
			d.log.Info("A change of [registry.mcsd] needs a restart; the directory is read as at start")
		}
		d.UseConfig(cfg)
	}, nil
}
