package config

import (
	"fmt"
	"regexp"
	"strings"

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
	key := keyAt(data, offsetOf(data, row, col))
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

// offsetOf turns a 1-based line and byte column into an offset in data.
func offsetOf(data []byte, row, col int) int {
	off := 0
	for r := 1; r < row; r++ {
		i := strings.IndexByte(string(data[off:]), '\n')
		if i < 0 {
			return len(data)
		}
		off += i + 1
	}
	return min(off+col-1, len(data))
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
