package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// typeErrorMessage is go-toml's wording of a value of the wrong type; it names the Go
// struct field it was decoded into, which means nothing to the file's author.
var typeErrorMessage = regexp.MustCompile(`^toml: cannot decode TOML (\S+) into struct field \S+ of type (.+)$`)

// decodeErrorProblem is a go-toml decode error as a problem: the dotted key the value
// was written under (the innermost one, inside inline tables and arrays, with the
// index of an array entry), its line, and a message in TOML's words.
func decodeErrorProblem(data []byte, de *toml.DecodeError) Problem {
	row, col := de.Position()
	key := keyAt(data, newLineStarts(data).offset(row, col, len(data)))
	if key == "" {
		key = dottedKey(de.Key())
	}
	if key == "" {
		key = "(document)"
	}
	msg := de.Error()
	if m := typeErrorMessage.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("must be %s, not %s", tomlTypeOf(m[2]), article(m[1]))
	}
	return Problem{Key: key, Line: row, Message: msg}
}

// tomlTypeOf names a Go type of the schema as a TOML type.
func tomlTypeOf(goType string) string {
	t := strings.TrimPrefix(goType, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a float"
	case t == "[]string":
		return "an array of strings"
	case strings.HasPrefix(t, "[]"):
		return "an array of tables"
	}
	return "a table"
}

func article(tomlType string) string {
	if strings.IndexByte("aeiou", tomlType[0]) >= 0 {
		return "an " + tomlType
	}
	return "a " + tomlType
}

// lineStarts is the offset each line of a document starts at, found in one pass over
// it: the line of an offset is then a binary search, so that a document with a problem
// on its last line, or with a problem on each of its lines, is reported in time linear
// in its size (BenchmarkParseProblemAtTheEnd).
type lineStarts []int

func newLineStarts(data []byte) lineStarts {
	starts := make(lineStarts, 1, 1+bytes.Count(data, []byte{'\n'}))
	for off := 0; ; {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return starts
		}
		off += i + 1
		starts = append(starts, off)
	}
}

// line is the 1-based line of offset.
func (l lineStarts) line(offset int) int {
	return sort.SearchInts(l, offset+1)
}

// offset turns a 1-based line and byte column into an offset in a document of size
// bytes; a line past the end is the end.
func (l lineStarts) offset(row, col, size int) int {
	if row < 1 || row > len(l) {
		return size
	}
	return max(0, min(l[row-1]+col-1, size))
}

// keyAt is the dotted key of the innermost value written at offset: "server.listen"
// for `server = { listen = 1 }`, "registry.members[1].id" for the second member. It
// is "" when no key-value holds the offset or the document does not parse.
func keyAt(data []byte, offset int) string {
	var p unstable.Parser
	p.Reset(data)
	table := ""
	entries := map[string]int{}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			table = keyOf(e.Key())
		case unstable.ArrayTable:
			name := keyOf(e.Key())
			table = fmt.Sprintf("%s[%d]", name, entries[name])
			entries[name]++
		case unstable.KeyValue:
			if !contains(e.Raw, offset) {
				continue
			}
			return join(table, inner(keyOf(e.Key()), e.Value(), offset))
		}
	}
	return ""
}

// inner descends from the value of key to the innermost key-value at offset.
func inner(key string, v *unstable.Node, offset int) string {
	switch v.Kind {
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			kv := it.Node()
			if kv.Kind == unstable.KeyValue && contains(kv.Raw, offset) {
				return join(key, inner(keyOf(kv.Key()), kv.Value(), offset))
			}
		}
	case unstable.Array:
		// An element's extent is not recorded for tables; the element is the last one
		// that starts before the offset.
		i, found := 0, -1
		var at *unstable.Node
		for it := v.Children(); it.Next(); {
			el := it.Node()
			if el.Kind == unstable.Comment {
				continue
			}
			if start(el) >= 0 && start(el) <= offset {
				found, at = i, el
			}
			i++
		}
		if found >= 0 {
			return inner(fmt.Sprintf("%s[%d]", key, found), at, offset)
		}
	}
	return key
}

// start is the offset a value begins at, or -1 when it is not known.
func start(n *unstable.Node) int {
	if n.Raw.Length > 0 {
		return int(n.Raw.Offset)
	}
	if c := n.Child(); c != nil {
		return start(c)
	}
	return -1
}

func contains(r unstable.Range, offset int) bool {
	return offset >= int(r.Offset) && offset < int(r.Offset)+int(r.Length)
}

func keyOf(it unstable.Iterator) string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return dottedKey(parts)
}

func join(table, key string) string {
	if table == "" {
		return key
	}
	return table + "." + key
}

// MaxUnknownKeys is the most keys a document may have that no field of the schema
// takes (its unknown keys, and the keys written under an unknown table or value) for
// it to be decoded: a document with more is refused with its first MaxUnknownKeys
// unknown keys, undecoded. go-toml's check of duplicate keys costs, for each key, the
// keys recorded before it in its table, which only keys the schema does not know can
// make many: past this, a document of 1 MiB would take seconds to refuse.
const MaxUnknownKeys = 100

// CheckUnknownKeys refuses (a *Problems, source naming data) a document with more than
// MaxUnknownKeys keys no field takes, as Parse refuses it, with one pass over it: what
// a caller checks before decoding a document with go-toml itself (the operator's
// webhook, before it renders an inline configuration). Any other document is nil.
func CheckUnknownKeys(data []byte, source string) error {
	if w := walkKeys(data, reflect.TypeFor[Config]()); w.stray > MaxUnknownKeys {
		return w.tooMany(source)
	}
	return nil
}

// walkKeys walks data, a document to decode into root, for its unknown keys: every key
// that names no field of root's schema, what go-toml's DisallowUnknownFields reports,
// found in one pass over the document. go-toml materializes each of its unknown-field
// errors with a scan and a split of the whole document, which makes a document of n
// unknown keys cost n times its size; this walk costs its size, and a line index built
// once.
//
// The keys are go-toml's, decided as its decoder decides them (a key matches a field's
// toml tag exactly or case-insensitively; after an unknown table, its key-values are
// not looked at): a table's dotted key, or the table's key and the key-value's
// (arrays of tables without an index). Inside an inline table, the key names the
// path to the value too ("server.tls.x" for `server = { tls = { x = 1 } }`, and
// "registry.members[1].x" for the second element of an inline array), where go-toml
// names the innermost key-value alone. TestUnknownKeysAsGoToml and FuzzParse hold it
// to go-toml. The walk stops at a syntax error, which it keeps.
func walkKeys(data []byte, root reflect.Type) *keyWalker {
	w := &keyWalker{data: data}
	var p unstable.Parser
	p.Reset(data)
	target, table, skipping := root, "", false
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts := keyParts(e.Key())
			table = dottedKey(parts)
			target, skipping = tableTarget(root, parts, e.Kind == unstable.ArrayTable)
			if skipping {
				w.missing(table, e, nil)
			}
		case unstable.KeyValue:
			switch {
			case target != nil:
				w.keyValue(target, table, e)
			case skipping:
				w.stray += 1 + keysIn(e.Value())
			}
		}
	}
	w.err = p.Error()
	return w
}

// unknownKeys is walkKeys' unknown keys of data.
func unknownKeys(data []byte, root reflect.Type) []Problem { return walkKeys(data, root).out }

// keyWalker collects unknown keys; its line index is built at the first one.
type keyWalker struct {
	data  []byte
	lines lineStarts
	out   []Problem
	// stray counts the unknown keys and the keys written under them.
	stray int
	// err is the syntax error the walk stopped at, if any.
	err error
}

// missing reports key, written at the key of node, with value (nil for a table).
func (w *keyWalker) missing(key string, node, value *unstable.Node) {
	w.stray++
	if value != nil {
		w.stray += keysIn(value)
	}
	if w.lines == nil {
		w.lines = newLineStarts(w.data)
	}
	line := 0
	if it := node.Key(); it.Next() {
		line = w.lines.line(int(it.Node().Raw.Offset))
	}
	w.out = append(w.out, Problem{Key: key, Line: line, Message: "unknown key"})
}

// tooMany is the refusal of a document with more than MaxUnknownKeys stray keys: its
// first unknown keys, the count, and the syntax error the walk stopped at.
func (w *keyWalker) tooMany(source string) *Problems {
	listed := w.out[:min(len(w.out), MaxUnknownKeys)]
	ps := append([]Problem(nil), listed...)
	ps = append(ps, Problem{Key: "(document)", Message: fmt.Sprintf(
		"has %d keys that no key of ferrofed.toml takes (%d unknown keys, and the keys under them), more than %d: the first %d unknown keys are listed, and the document is not checked further",
		w.stray, len(w.out), MaxUnknownKeys, len(listed))})
	var perr *unstable.ParserError
	if errors.As(w.err, &perr) {
		if w.lines == nil {
			w.lines = newLineStarts(w.data)
		}
		off := len(w.data)
		if perr.Highlight != nil && cap(perr.Highlight) <= cap(w.data) {
			off = cap(w.data) - cap(perr.Highlight) // the highlight is a part of the document
		}
		ps = append(ps, Problem{Key: "(document)", Line: w.lines.line(off), Message: "toml: " + perr.Message})
	}
	return &Problems{Source: source, List: ps}
}

// keysIn counts the keys written in the value v: those of its inline tables.
func keysIn(v *unstable.Node) int {
	n := 0
	for it := v.Children(); it.Next(); {
		c := it.Node()
		switch c.Kind {
		case unstable.KeyValue:
			n += 1 + keysIn(c.Value())
		case unstable.InlineTable, unstable.Array:
			n += keysIn(c)
		}
	}
	return n
}

// keyValue walks the key-value kv, written under the dotted key prefix, from the type t.
func (w *keyWalker) keyValue(t reflect.Type, prefix string, kv *unstable.Node) {
	parts := keyParts(kv.Key())
	for i := 0; i < len(parts); {
		t = deref(t)
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldOf(t, parts[i])
			if !ok {
				w.missing(join(prefix, dottedKey(parts)), kv, kv.Value())
				return
			}
			t, i = f, i+1
		case reflect.Slice, reflect.Array:
			t = t.Elem()
		case reflect.Map:
			t, i = t.Elem(), i+1
		default: // an interface takes anything; a scalar is a type error of the decode
			return
		}
	}
	w.value(t, join(prefix, dottedKey(parts)), kv.Value())
}

// value walks the value v, written at key, from the type t: the keys of inline tables.
func (w *keyWalker) value(t reflect.Type, key string, v *unstable.Node) {
	t = deref(t)
	switch v.Kind {
	case unstable.InlineTable:
		if t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
			return
		}
		for it := v.Children(); it.Next(); {
			if kv := it.Node(); kv.Kind == unstable.KeyValue {
				w.keyValue(t, key, kv)
			}
		}
	case unstable.Array:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return
		}
		i := 0
		for it := v.Children(); it.Next(); {
			el := it.Node()
			if el.Kind == unstable.Comment {
				continue
			}
			w.value(t.Elem(), fmt.Sprintf("%s[%d]", key, i), el)
			i++
		}
	}
}

// tableTarget is the type the key-values under the table [key] (or [[key]]) decode
// into, and whether go-toml finds no field for it; nil when they are not looked at
// (an unknown table, or a type that takes anything).
func tableTarget(t reflect.Type, key []string, array bool) (reflect.Type, bool) {
	for i := 0; ; {
		t = deref(t)
		if i == len(key) {
			break
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldOf(t, key[i])
			if !ok {
				return nil, true
			}
			t, i = f, i+1
		case reflect.Slice, reflect.Array:
			t = t.Elem()
		case reflect.Map:
			t, i = t.Elem(), i+1
		default:
			return nil, false
		}
	}
	if array {
		if k := t.Kind(); k != reflect.Slice && k != reflect.Array {
			return nil, false
		}
		t = t.Elem()
	}
	for {
		switch t = deref(t); t.Kind() {
		case reflect.Slice, reflect.Array:
			t = t.Elem()
		case reflect.Struct, reflect.Map:
			return t, false
		default:
			return nil, false
		}
	}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldsOf is, for each struct type, the types of its fields by name: the exact names
// (the toml tag, or the Go name without one) and their lower-case forms, as go-toml
// matches a key to a field.
var fieldsOf sync.Map // reflect.Type -> *structFields

type structFields struct{ exact, folded map[string]reflect.Type }

// fieldOf is the type of the field of the struct type t that go-toml decodes name into.
func fieldOf(t reflect.Type, name string) (reflect.Type, bool) {
	v, ok := fieldsOf.Load(t)
	if !ok {
		f := &structFields{exact: map[string]reflect.Type{}, folded: map[string]reflect.Type{}}
		addFields(f, t, map[reflect.Type]bool{})
		v, _ = fieldsOf.LoadOrStore(t, f)
	}
	f := v.(*structFields)
	if ft, ok := f.exact[name]; ok {
		return ft, true
	}
	ft, ok := f.folded[strings.ToLower(name)]
	return ft, ok
}

// addFields adds the fields of t, flattening untagged embedded structs after the
// others, as go-toml does.
func addFields(f *structFields, t reflect.Type, visited map[reflect.Type]bool) {
	if visited[t] {
		return
	}
	visited[t] = true
	defer delete(visited, t)
	var embedded []reflect.Type
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("toml")
		if tagged && tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous {
			ft := deref(sf.Type)
			if ft.Kind() != reflect.Struct {
				continue
			}
			if name == "" {
				embedded = append(embedded, ft)
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, ok := f.exact[name]; !ok {
			f.exact[name] = sf.Type
		}
		if lower := strings.ToLower(name); f.folded[lower] == nil {
			f.folded[lower] = sf.Type
		}
	}
	for _, ft := range embedded {
		addFields(f, ft, visited)
	}
}

// keyParts are the parts of a dotted key.
func keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}
