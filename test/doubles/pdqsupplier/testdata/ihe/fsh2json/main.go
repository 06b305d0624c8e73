// Command fsh2json renders the FHIR Shorthand example instances of the PDQm guide kept
// beside it as the JSON the self-test reads. It handles the rules those files use, no
// more: `* path = value` with `[+]`, `[=]`, `[n]` and named slices (`[slice]`,
// `[slice][+]`), rules indented under a path, string / #code / system#code / number /
// boolean / date values, and a bare instance name (inlined). Every value comes from
// the FSH: the instance's rules; the resource type and canonical of the profile its
// InstanceOf names (Profile/Parent/Id); the values that profile assigns (`* type =
// #searchset`, a slice's `* name = "resource"` or `* search.mode = #match`), applied
// first, as SUSHI applies them; and an extension slice's url from the profile's
// `extension contains <url> named <slice>`. What FSH leaves to the FHIR definitions,
// which elements repeat and which are Codings, is the table below, from R4. Only
// instances of `Usage: #example` are written.
//
//	go run ./test/doubles/pdqsupplier/testdata/ihe/fsh2json test/doubles/pdqsupplier/testdata/ihe
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// repeats are the R4 elements (by their path without indexes) that are arrays.
var repeats = map[string]bool{
	"meta.profile": true, "meta.security": true, "meta.tag": true,
	"identifier": true, "name": true, "name.given": true, "name.prefix": true, "name.suffix": true,
	"telecom": true, "address": true, "address.line": true, "link": true, "extension": true,
	"entry": true, "entry.search.extension": true, "issue": true, "parameter": true,
}

// codings are the R4 elements of type Coding (system#code is a Coding there).
var codings = map[string]bool{"meta.security": true, "meta.tag": true}

type assignment struct{ path, value string }

type profile struct {
	resourceType, canonical string
	assigns                 []assignment // paths without a slice
	slices                  map[string][]assignment
}

type instance struct {
	name, of string
	example  bool
	rules    []assignment
}

var (
	// comment is a // comment: at the start of a line or after a blank, never in a url.
	comment  = regexp.MustCompile(`(^|\s)//.*$`)
	rule     = regexp.MustCompile(`^(\s*)\* (\S+)(?: = (.+))?$`)
	segment  = regexp.MustCompile(`^([A-Za-z]+)((?:\[[^\]]+\])*)$`)
	brackets = regexp.MustCompile(`\[([^\]]+)\]`)
	urls     = regexp.MustCompile(`(https?://\S+) named (\S+)`)
)

func main() {
	dir := os.Args[1]
	files, _ := filepath.Glob(filepath.Join(dir, "*.fsh"))
	profiles := map[string]*profile{}
	extURL := map[string]string{}
	var instances []*instance
	for _, f := range files {
		instances = append(instances, parse(f, profiles, extURL)...)
	}
	r := renderer{profiles: profiles, extURL: extURL, byName: map[string]*instance{}}
	for _, in := range instances {
		r.byName[in.name] = in
	}
	for _, in := range instances {
		if !in.example {
			continue
		}
		b, err := json.MarshalIndent(r.render(in), "", "  ")
		if err != nil {
			panic(err)
		}
		out := filepath.Join(dir, in.name+".json")
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			panic(err)
		}
		fmt.Println("wrote", out)
	}
}

func parse(file string, profiles map[string]*profile, extURL map[string]string) []*instance {
	f, err := os.Open(file)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	var out []*instance
	var cur *instance
	var prof *profile
	var profName, parent string
	var stack []string
	var contains, triple bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.Count(line, `"""`)%2 == 1 {
			triple = !triple
			continue
		}
		if triple {
			continue
		}
		line = strings.TrimRight(comment.ReplaceAllString(line, ""), " \t")
		key, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		switch key {
		case "Instance":
			cur, prof, stack = &instance{name: val}, nil, nil
			out = append(out, cur)
			continue
		case "InstanceOf":
			cur.of = val
			continue
		case "Usage":
			cur.example = val == "#example"
			continue
		case "Profile":
			cur, prof, profName, stack = nil, nil, val, nil
			continue
		case "Parent":
			parent = val
			continue
		case "Id":
			if cur == nil {
				prof = &profile{resourceType: parent, canonical: "https://profiles.ihe.net/ITI/PDQm/StructureDefinition/" + val, slices: map[string][]assignment{}}
				profiles[profName], profiles[val] = prof, prof
			}
			continue
		case "Title", "Description", "Alias", "Invariant", "Expression", "Severity", "XPath":
			continue
		}
		if strings.Contains(line, "extension contains") || contains {
			contains = strings.HasSuffix(strings.TrimSpace(line), "and")
			for _, m := range urls.FindAllStringSubmatch(line, -1) {
				extURL[m[2]] = m[1]
			}
			continue
		}
		m := rule.FindStringSubmatch(line)
		if m == nil || (cur == nil && prof == nil) {
			continue
		}
		depth := len(m[1]) / 2
		stack = append(stack[:min(depth, len(stack))], m[2])
		if m[3] == "" {
			continue
		}
		path := strings.Join(stack, ".")
		// A [+] of an enclosing rule makes one element: its children after the
		// first use it as [=].
		for i := range stack[:len(stack)-1] {
			stack[i] = strings.ReplaceAll(stack[i], "[+]", "[=]")
		}
		value := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[3]), "(exactly)"))
		switch {
		case cur != nil:
			cur.rules = append(cur.rules, assignment{path, value})
		case strings.Contains(path, "^") || strings.Contains(value, "only "):
		default:
			// A profile's assignment: to every instance, or to each element of a slice.
			if i := strings.Index(path, "["); i >= 0 {
				j := strings.Index(path[i:], "]") + i
				k := path[:j+1]
				prof.slices[k] = append(prof.slices[k], assignment{strings.TrimPrefix(path[j+1:], "."), value})
			} else {
				prof.assigns = append(prof.assigns, assignment{path, value})
			}
		}
	}
	return out
}

type renderer struct {
	profiles map[string]*profile
	extURL   map[string]string
	byName   map[string]*instance
}

// state is one resource being rendered: the index [=] means per array path, and the
// element index of each named slice per array path.
type state struct {
	prof   *profile
	last   map[string]int
	slices map[string]int
}

func (r renderer) render(in *instance) map[string]any {
	res := map[string]any{}
	st := &state{prof: r.profiles[in.of], last: map[string]int{}, slices: map[string]int{}}
	if st.prof != nil {
		res["resourceType"] = st.prof.resourceType
		res["meta"] = map[string]any{"profile": []any{st.prof.canonical}}
		for _, a := range st.prof.assigns {
			r.set(res, st, "", a.path, a.value)
		}
	} else {
		res["resourceType"] = in.of
	}
	res["id"] = in.name
	for _, a := range in.rules {
		r.set(res, st, "", a.path, a.value)
	}
	return res
}

// set assigns value at path in res, an element at prefix in its resource.
func (r renderer) set(res map[string]any, st *state, prefix, path, value string) {
	var node any = res
	bare := strings.Split(prefix, ".")
	if prefix == "" {
		bare = nil
	}
	where := "" // the path with the index of every array: a named slice is per parent
	segs := strings.Split(path, ".")
	for i, s := range segs {
		m := segment.FindStringSubmatch(s)
		if m == nil {
			panic("path " + path)
		}
		name := m[1]
		var idx []string
		for _, b := range brackets.FindAllStringSubmatch(m[2], -1) {
			idx = append(idx, b[1])
		}
		bare = append(bare, name)
		key := strings.Join(bare, ".")
		where += "." + name
		obj := node.(map[string]any)
		leaf := i == len(segs)-1
		if !repeats[key] {
			if leaf {
				obj[name] = r.value(value, codings[key])
				return
			}
			if obj[name] == nil {
				obj[name] = map[string]any{}
			}
			node = obj[name]
			continue
		}
		arr, _ := obj[name].([]any)
		at, fresh, slice := 0, false, ""
		switch {
		case len(idx) == 0:
		case idx[0] == "+":
			at, fresh = len(arr), true
		case idx[0] == "=":
			at = st.last[key]
		default:
			if n, err := strconv.Atoi(idx[0]); err == nil {
				at = n
				break
			}
			// A named slice: its last element, or a new one ([slice][+], first use).
			slice = idx[0]
			j, seen := st.slices[where+"["+slice+"]"]
			if !seen || (len(idx) > 1 && idx[1] == "+") {
				j, fresh = len(arr), true
			}
			at = j
			st.slices[where+"["+slice+"]"] = at
		}
		st.last[key] = at
		where += fmt.Sprintf("[%d]", at)
		for len(arr) <= at {
			if leaf {
				arr = append(arr, nil)
			} else {
				arr = append(arr, map[string]any{})
			}
		}
		obj[name] = arr
		if leaf {
			arr[at] = r.value(value, codings[key])
			return
		}
		node = arr[at]
		if fresh && slice != "" {
			el := node.(map[string]any)
			if u, ok := r.extURL[slice]; ok && name == "extension" {
				el["url"] = u
			}
			if st.prof != nil {
				for _, a := range st.prof.slices[key+"["+slice+"]"] {
					sub := &state{prof: nil, last: map[string]int{}, slices: map[string]int{}}
					r.set(el, sub, key, a.path, a.value)
				}
			}
		}
	}
}

func (r renderer) value(v string, coding bool) any {
	switch {
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		if err != nil {
			panic(v)
		}
		return s
	case strings.HasPrefix(v, "#"):
		return v[1:]
	case strings.Contains(v, "#") && coding:
		sys, code, _ := strings.Cut(v, "#")
		return map[string]any{"system": sys, "code": code}
	case v == "true" || v == "false":
		return v == "true"
	}
	if n, err := strconv.Atoi(v); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f
	}
	if in, ok := r.byName[v]; ok {
		return r.render(in)
	}
	return v // a date or dateTime
}
