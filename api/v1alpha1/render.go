package v1alpha1

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// Where the pod finds its files. The Deployment mounts the rendered ConfigMap and the
// TLS Secret there; the rendered ferrofed.toml points at them.
const (
	ConfigDir      = "/etc/ferrofed"
	ConfigFileName = "ferrofed.toml"
	ConfigPath     = ConfigDir + "/" + ConfigFileName
	TLSDir         = ConfigDir + "/tls"
	TLSCertFile    = TLSDir + "/tls.crt"
	TLSKeyFile     = TLSDir + "/tls.key"
)

// ownedKeys are the ferrofed.toml keys the Gateway sets from its spec, with the field
// to use instead. A table key ("server.tls") owns everything under it.
var ownedKeys = []struct{ key, field string }{
	{"server.listen", "spec.port"},
	{"server.base_path", "spec.basePath"},
	{"server.request_timeout_ms", "spec.lifecycle.requestTimeout"},
	{"server.drain_delay_ms", "spec.lifecycle.drainDelay"},
	{"server.shutdown_timeout_ms", "spec.lifecycle.shutdownTimeout"},
	{"server.bindings_drain_timeout_ms", "spec.lifecycle.bindingsDrainTimeout"},
	{"server.termination_grace_period_seconds", "spec.lifecycle.terminationGracePeriodSeconds"},
	{"server.tls", "spec.tls.secretName"},
}

// RenderConfig renders the gateway's ferrofed.toml: the keys the spec owns (listen
// address, base path, the lifecycle budgets in milliseconds, the pod's grace period,
// the TLS files), merged with user, the rest of the configuration (inline or from the
// referenced ConfigMap). The output is deterministic: keys sorted, tables after keys.
//
// user that is not TOML, or that sets a key the spec owns, is refused with a
// *config.Problems naming each key. The result is what ParseRendered must accept
// before it may reach a pod.
func RenderConfig(spec *GatewaySpec, user []byte) ([]byte, error) {
	rest := map[string]any{}
	if err := toml.Unmarshal(user, &rest); err != nil {
		return nil, userProblems(user, err)
	}
	if ps := ownedKeyProblems(rest); len(ps) > 0 {
		return nil, &config.Problems{Source: "spec.config", List: ps}
	}
	doc := map[string]any{"server": spec.serverTable()}
	merge(doc, rest)
	var b bytes.Buffer
	b.WriteString("# Rendered by ferrofed-operator from a Gateway; edit the Gateway, not this file.\n")
	enc := toml.NewEncoder(&b)
	enc.SetIndentTables(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode ferrofed.toml: %w", err)
	}
	return b.Bytes(), nil
}

// ParseRendered runs the gateway's own `config check` (config.Parse, without the checks
// that read files, which live in the pod) on a rendered ferrofed.toml.
func ParseRendered(rendered []byte) (*config.Config, error) {
	return config.Parse(rendered, "rendered ferrofed.toml", config.Options{SkipFiles: true})
}

func (s *GatewaySpec) serverTable() map[string]any {
	r := s.Budgets().Resolve()
	grace, _ := s.GracePeriod()
	port := s.Port
	if port == 0 {
		port = DefaultPort
	}
	base := s.BasePath
	if base == "" {
		base = DefaultBasePath
	}
	server := map[string]any{
		"listen":                           net.JoinHostPort("0.0.0.0", strconv.Itoa(int(port))),
		"base_path":                        base,
		"request_timeout_ms":               r.RequestTimeout.Milliseconds(),
		"drain_delay_ms":                   r.DrainDelay.Milliseconds(),
		"shutdown_timeout_ms":              r.ShutdownTimeout.Milliseconds(),
		"bindings_drain_timeout_ms":        r.BindingsDrainTimeout.Milliseconds(),
		"termination_grace_period_seconds": grace,
	}
	if s.TLS != nil {
		server["tls"] = map[string]any{"certificate_file": TLSCertFile, "key_file": TLSKeyFile}
	}
	return server
}

// ownedKeyProblems names every key of rest that the spec owns.
func ownedKeyProblems(rest map[string]any) []config.Problem {
	var ps []config.Problem
	for _, o := range ownedKeys {
		if lookup(rest, strings.Split(o.key, ".")) {
			ps = append(ps, config.Problem{Key: o.key, Message: fmt.Sprintf(
				"is set by the Gateway from %s; set %s instead of this key", o.field, o.field)})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Key < ps[j].Key })
	return ps
}

func lookup(m map[string]any, path []string) bool {
	v, ok := m[path[0]]
	if !ok || len(path) == 1 {
		return ok
	}
	sub, isTable := v.(map[string]any)
	return isTable && lookup(sub, path[1:])
}

// merge adds src into dst; tables present in both are merged key by key.
func merge(dst, src map[string]any) {
	for k, v := range src {
		d, dok := dst[k].(map[string]any)
		s, sok := v.(map[string]any)
		if dok && sok {
			merge(d, s)
			continue
		}
		dst[k] = v
	}
}

// userProblems reports a spec.config document that is not TOML the way `config check`
// would, with its key and line.
func userProblems(user []byte, err error) error {
	var ps *config.Problems
	if _, perr := config.Parse(user, "spec.config", config.Options{SkipFiles: true}); errors.As(perr, &ps) {
		return ps
	}
	return &config.Problems{Source: "spec.config", List: []config.Problem{{Key: "(document)", Message: err.Error()}}}
}
