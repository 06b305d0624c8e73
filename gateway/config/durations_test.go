package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// readTogether are the *_ms keys read otherwise than by their own accessor: the drain
// budgets, whose defaults follow from one another, are read as one plan
// (Config.Lifecycle) (docs/configuration.md, "How it is read").
var readTogether = map[string]bool{
	"Server.RequestTimeoutMS": true, "Server.DrainDelayMS": true, "Server.ShutdownTimeoutMS": true,
	"Server.BindingsDrainTimeoutMS": true,
}

// TestEveryMillisecondKeyHasItsDurationAccessor keeps the one shape of a duration
// setting: a *_ms key is read through a method of its table named for the key without
// _ms, taking nothing and returning a time.Duration.
func TestEveryMillisecondKeyHasItsDurationAccessor(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() != reflect.TypeFor[Config]().PkgPath() {
			return
		}
		seen[typ] = true
		for f := range typ.Fields() {
			walk(f.Type)
			tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !strings.HasSuffix(tag, "_ms") || readTogether[typ.Name()+"."+f.Name] {
				continue
			}
			name := strings.TrimSuffix(f.Name, "MS")
			m, ok := reflect.PointerTo(typ).MethodByName(name)
			if !ok || m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0) != reflect.TypeFor[time.Duration]() {
				t.Errorf("%s.%s (%s): want a method %s() time.Duration of %s", typ.Name(), f.Name, tag, name, typ.Name())
			}
		}
	}
	walk(reflect.TypeFor[Config]())
	if len(seen) < 10 {
		t.Fatalf("walked %d tables only", len(seen))
	}
}
