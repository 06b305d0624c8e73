package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Owned is the part of a ferrofed.toml that something other than its author sets: the
// operator sets [server] from a Gateway's spec, and federation.page_token_key_file to
// the key it mounts. Server and Federation hold the values (a key is rendered when its
// field is set: non-nil, non-zero); Fields names, for every key the owner reserves
// (rendered or not), the spec field the user sets instead ("spec.…") or why no one
// does. A key names a table ("server.tls") to reserve everything under it.
type Owned struct {
	Server     Server
	Federation Federation
	// Audit holds the spool directories the operator mounts (audit.spool_dir and
	// audit.feed.spool_dir); its other fields stay the user's.
	Audit Audit
	// StoredQueries holds the directory the operator mounts the StoredQuery ConfigMap
	// at (stored_queries.dir); its other fields stay the user's.
	StoredQueries StoredQueries
	// Tracing, when set, is the whole [tracing] table (the Gateway's spec.tracing):
	// Fields must then reserve "tracing", so that a [tracing] of the user's is refused.
	Tracing *Tracing
	Fields  map[string]string
	// Issuers are [[auth.issuers]] entries appended after the user's (the operator's
	// own, docs/operator.md "The operator reads its pods").
	Issuers []Issuer
	// ReservedIssuer, when set, is an issuer value no entry of the user's may name:
	// the operator's.
	ReservedIssuer string
}

// Render writes the ferrofed.toml of owned merged with user, the rest of the
// configuration, typed from Server's toml tags. The output is deterministic: keys
// sorted, tables after keys, under a header saying it is rendered.
//
// user that is not TOML, or that sets a key owned reserves, is refused with a *Problems
// naming each key (source "spec.config"). The rendered file is not validated here:
// Parse it, as the pod will.
func Render(owned Owned, user []byte) ([]byte, error) {
	rest := map[string]any{}
	if err := toml.Unmarshal(user, &rest); err != nil {
		return nil, userProblems(user, err)
	}
	doc := map[string]any{}
	for name, t := range map[string]map[string]any{
		"server":         table(reflect.ValueOf(owned.Server)),
		"federation":     table(reflect.ValueOf(owned.Federation)),
		"audit":          table(reflect.ValueOf(owned.Audit)),
		"stored_queries": table(reflect.ValueOf(owned.StoredQueries)),
		"tracing":        tracingTable(owned.Tracing),
	} {
		for _, key := range flatKeys(name, t) {
			if !reserves(owned.Fields, key) {
				return nil, fmt.Errorf("render ferrofed.toml: %s is set but not reserved in Owned.Fields", key)
			}
		}
		if len(t) > 0 {
			doc[name] = t
		}
	}
	if ps := reservedKeyProblems(owned.Fields, rest); len(ps) > 0 {
		return nil, &Problems{Source: "spec.config", List: ps}
	}
	if ps := reservedIssuerProblems(owned.ReservedIssuer, rest); len(ps) > 0 {
		return nil, &Problems{Source: "spec.config", List: ps}
	}
	merge(doc, rest)
	appendIssuers(doc, owned.Issuers)
	var b bytes.Buffer
	b.WriteString("# Rendered by ferrofed-operator from a Gateway; edit the Gateway, not this file.\n")
	enc := toml.NewEncoder(&b)
	enc.SetIndentTables(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode ferrofed.toml: %w", err)
	}
	return b.Bytes(), nil
}

// userIssuers are the [[auth.issuers]] tables of a decoded document.
func userIssuers(doc map[string]any) []any {
	auth, _ := doc["auth"].(map[string]any)
	list, _ := auth["issuers"].([]any)
	return list
}

// reservedIssuerProblems names each user issuer whose issuer is reserved.
func reservedIssuerProblems(reserved string, rest map[string]any) []Problem {
	if reserved == "" {
		return nil
	}
	var ps []Problem
	for i, t := range userIssuers(rest) {
		if m, ok := t.(map[string]any); ok && m["issuer"] == reserved {
			ps = append(ps, Problem{Key: fmt.Sprintf("auth.issuers[%d].issuer", i),
				Message: fmt.Sprintf("%q is the operator's own issuer, which it adds itself: name your issuer otherwise", reserved)})
		}
	}
	return ps
}

// appendIssuers adds issuers after the [[auth.issuers]] of doc.
func appendIssuers(doc map[string]any, issuers []Issuer) {
	if len(issuers) == 0 {
		return
	}
	auth, ok := doc["auth"].(map[string]any)
	if !ok {
		auth = map[string]any{}
		doc["auth"] = auth
	}
	list := userIssuers(doc)
	for _, is := range issuers {
		list = append(list, table(reflect.ValueOf(is)))
	}
	auth["issuers"] = list
}

// tracingTable is owned's [tracing], empty when unset.
func tracingTable(t *Tracing) map[string]any {
	if t == nil {
		return map[string]any{}
	}
	return table(reflect.ValueOf(*t))
}

// table is the TOML table of a struct of this package's schema: each field under its
// toml tag, nil pointers and zero values left out, nested structs as tables (left out
// when empty).
func table(v reflect.Value) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if key == "" || key == "-" || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		} else if fv.IsZero() {
			continue
		}
		if fv.Kind() == reflect.Struct {
			if sub := table(fv); len(sub) > 0 {
				out[key] = sub
			}
			continue
		}
		out[key] = fv.Interface()
	}
	return out
}

func flatKeys(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out = append(out, flatKeys(prefix+"."+k, sub)...)
			continue
		}
		out = append(out, prefix+"."+k)
	}
	return out
}

// reserves reports whether key, or a table enclosing it, is among fields.
func reserves(fields map[string]string, key string) bool {
	for k := key; k != ""; {
		if _, ok := fields[k]; ok {
			return true
		}
		i := strings.LastIndex(k, ".")
		if i < 0 {
			return false
		}
		k = k[:i]
	}
	return false
}

// reservedKeyProblems names every key of rest that fields reserves, sorted by key.
func reservedKeyProblems(fields map[string]string, rest map[string]any) []Problem {
	var ps []Problem
	for key, field := range fields {
		if !lookup(rest, strings.Split(key, ".")) {
			continue
		}
		msg := fmt.Sprintf("is set by the Gateway from %s; set %s instead of this key", field, field)
		if !strings.HasPrefix(field, "spec.") {
			msg = "is set by the operator: " + field
		}
		ps = append(ps, Problem{Key: key, Message: msg})
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

// AuditSpools is the number of spools a ferrofed.toml's [audit] table asks for: 0
// without [audit] or with destination "log", 1 with destination "repository", 2 when
// [audit.feed] is there too. A document that is not TOML has none (Render and Parse
// report it).
func AuditSpools(doc []byte) int {
	var d struct {
		Audit *auditShape `toml:"audit"`
	}
	if err := toml.Unmarshal(doc, &d); err != nil {
		return 0
	}
	return d.Audit.spools()
}

// auditShape is what AuditSpools reads of [audit].
type auditShape struct {
	Destination string    `toml:"destination"`
	Feed        *struct{} `toml:"feed"`
}

func (a *auditShape) spools() int {
	switch {
	case a == nil || a.Destination != AuditToRepository:
		return 0
	case a.Feed != nil:
		return 2
	}
	return 1
}

// Mounts is what a ferrofed.toml asks the operator to mount for it: its audit spools
// (AuditSpools) and the stored-query directory (HasStoredQueries).
type Mounts struct {
	AuditSpools   int
	StoredQueries bool
}

// MountsOf reads doc's Mounts, each as AuditSpools and HasStoredQueries read it, with
// one decode of a document both tables of which decode (the document is otherwise
// read once for each).
func MountsOf(doc []byte) Mounts {
	var d struct {
		Audit         *auditShape `toml:"audit"`
		StoredQueries *struct{}   `toml:"stored_queries"`
	}
	if toml.Unmarshal(doc, &d) != nil {
		return Mounts{AuditSpools: AuditSpools(doc), StoredQueries: HasStoredQueries(doc)}
	}
	return Mounts{AuditSpools: d.Audit.spools(), StoredQueries: d.StoredQueries != nil}
}

// userProblems reports a user document that is not TOML the way `config check` would,
// with its key and line.
func userProblems(user []byte, err error) error {
	var ps *Problems
	if _, perr := Parse(user, "spec.config", Options{SkipFiles: true}); errors.As(perr, &ps) {
		return ps
	}
	return &Problems{Source: "spec.config", List: []Problem{{Key: "(document)", Message: err.Error()}}}
}
