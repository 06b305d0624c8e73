// Command fsh2json renders the FHIR Shorthand example instances of the PDQm guide kept
// beside it as the JSON the self-test reads. It handles the rules those files use, no
// more: `* path = value` with `[+]`, `[=]`, `[n]` and named extension slices,
// indented rules under a path, string / #code / system#code / number / boolean /
// date values, and a bare instance name (inlined). Every value comes from the FSH; the
// profile's resource type and canonical come from its Profile/Parent/Id lines, a
// slice's extension url from its `extension contains <url> named <slice>` rule. What
// FSH leaves to the FHIR definitions, which elements repeat and which are Codings, is
// the table below, from R4.
//
//	go run ./test/pdqm/testdata/ihe/fsh2json test/pdqm/testdata/ihe
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
	"entry": true, "issue": true,
}

// codings are the R4 elements of type Coding (system#code is a Coding there).
var codings = map[string]bool{"meta.security": true, "meta.tag": true}

type profile struct{ resourceType, canonical string }

type instance struct {
	name, of string
	rules    [][2]string // path, value
}

// comment is a // comment: at the start of a line or after a blank, never in a url.
var comment = regexp.MustCompile(`(^|\s)//.*$`)

var rule = regexp.MustCompile(`^(\s*)\* (\S+)(?: = (.+))?$`)

func main() {
	dir := os.Args[1]
	files, _ := filepath.Glob(filepath.Join(dir, "*.fsh"))
	profiles := map[string]profile{}
	slices := map[string]string{}
	var instances []*instance
	for _, f := range files {
		ps, ss, is := parse(f)
		for k, v := range ps {
			profiles[k] = v
		}
		for k, v := range ss {
			slices[k] = v
		}
		instances = append(instances, is...)
	}
	byName := map[string]*instance{}
	for _, in := range instances {
		byName[in.name] = in
	}
	for _, in := range instances {
		res := render(in, profiles, slices, byName)
		b, err := json.MarshalIndent(res, "", "  ")
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

func parse(file string) (map[string]profile, map[string]string, []*instance) {
	f, err := os.Open(file)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	profiles := map[string]profile{}
	slices := map[string]string{}
	var out []*instance
	var cur *instance
	var prof struct{ name, parent, id string }
	var stack []string // the paths of the enclosing indented rules
	var contains bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		line = comment.ReplaceAllString(line, "")
		key, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		switch key {
		case "Instance":
			cur = &instance{name: val}
			out = append(out, cur)
			stack = nil
			continue
		case "InstanceOf":
			cur.of = val
			continue
		case "Profile":
			cur, prof.name, prof.parent, prof.id = nil, val, "", ""
			continue
		case "Parent":
			prof.parent = val
			continue
		case "Id":
			prof.id = val
			p := profile{prof.parent, "https://profiles.ihe.net/ITI/PDQm/StructureDefinition/" + val}
			profiles[prof.name], profiles[prof.id] = p, p
			continue
		case "Title", "Description", "Usage", "Alias", "Invariant", "Expression", "Severity", "XPath":
			continue
		}
		// A slice's url: "* extension contains <url> named <slice> … and" over lines.
		if strings.Contains(line, "extension contains") || contains {
			contains = strings.HasSuffix(strings.TrimSpace(line), "and")
			for _, m := range regexp.MustCompile(`(https?://\S+) named (\S+)`).FindAllStringSubmatch(line, -1) {
				slices[m[2]] = m[1]
			}
			continue
		}
		if cur == nil {
			continue
		}
		m := rule.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		depth := len(m[1]) / 2
		stack = append(stack[:min(depth, len(stack))], m[2])
		path := strings.Join(stack, ".")
		if m[3] != "" {
			cur.rules = append(cur.rules, [2]string{path, strings.TrimSpace(m[3])})
		}
	}
	return profiles, slices, out
}

var segment = regexp.MustCompile(`^([A-Za-z]+)(?:\[([^\]]+)\])?$`)

func render(in *instance, profiles map[string]profile, slices map[string]string, byName map[string]*instance) map[string]any {
	res := map[string]any{}
	if p, ok := profiles[in.of]; ok {
		res["resourceType"] = p.resourceType
		res["meta"] = map[string]any{"profile": []any{p.canonical}}
	} else {
		res["resourceType"] = in.of
	}
	res["id"] = in.name
	last := map[string]int{} // the index [=] means, per array path
	for _, r := range in.rules {
		var node any = res
		var bare []string
		segs := strings.Split(r[0], ".")
		for i, s := range segs {
			m := segment.FindStringSubmatch(s)
			if m == nil {
				panic("path " + r[0])
			}
			name, index := m[1], m[2]
			bare = append(bare, name)
			key := strings.Join(bare, ".")
			obj := node.(map[string]any)
			leaf := i == len(segs)-1
			if !repeats[key] {
				if leaf {
					obj[name] = value(r[1], codings[key], byName, profiles, slices)
					break
				}
				if obj[name] == nil {
					obj[name] = map[string]any{}
				}
				node = obj[name]
				continue
			}
			arr, _ := obj[name].([]any)
			idx := 0
			switch {
			case index == "+":
				idx = len(arr)
			case index == "=":
				idx = last[key]
			case index != "":
				if n, err := strconv.Atoi(index); err == nil {
					idx = n
				} else { // a named slice: the element with its url, or a new one
					idx = len(arr)
					for j, e := range arr {
						if e.(map[string]any)["url"] == slices[index] {
							idx = j
						}
					}
					if idx == len(arr) {
						arr = append(arr, map[string]any{"url": slices[index]})
					}
				}
			}
			last[key] = idx
			for len(arr) <= idx {
				if leaf {
					arr = append(arr, nil)
				} else {
					arr = append(arr, map[string]any{})
				}
			}
			if leaf {
				arr[idx] = value(r[1], codings[key], byName, profiles, slices)
			}
			obj[name] = arr
			node = arr[idx]
		}
	}
	return res
}

func value(v string, coding bool, byName map[string]*instance, profiles map[string]profile, slices map[string]string) any {
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
	if in, ok := byName[v]; ok {
		return render(in, profiles, slices, byName)
	}
	return v // a date or dateTime
}
