// Package storedquery is the gateway's stored queries (docs/bindings.md#stored-queries):
// named query templates, each a FHIR OperationDefinition of kind query carrying an
// application/x-fhir-query template, kept in a directory every replica reads
// ([stored_queries] dir), managed on the operator surface ({base}/operator/stored-queries),
// distributed to every member whose CapabilityStatement supports it (PUT
// OperationDefinition/{id}), checked for drift on an interval and repaired. A client
// runs one with GET {base}/fhir/{Type}?_query={code}&…: the gateway substitutes the
// parameters and runs a plain federated search, so members need not support _query.
//
// Every request sent to a member goes through the federation surface's CallMember,
// which records the member endpoint's state as every member call does: a drift check
// that finds a copy missing or different still records the member up, it answered.
package storedquery

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Limits of one stored query.
const (
	// MaxDefinitionBytes bounds one OperationDefinition, as uploaded and as read from
	// the store (64 KiB).
	MaxDefinitionBytes = 64 << 10
	// MaxTemplateBytes bounds its template: the search it expands to is held to
	// limits.max_query_bytes after substitution anyway.
	MaxTemplateBytes = 8 << 10
	// MaxParameters bounds its in-parameters, and MaxTemplatePairs its template's
	// search parameters.
	MaxParameters    = 32
	MaxTemplatePairs = 64
)

// TemplateExtension is the extension that carries a stored query's template, a
// valueExpression of language TemplateLanguage.
const (
	TemplateExtension = "https://ferrofed.io/fhir/StructureDefinition/stored-query-template"
	TemplateLanguage  = "application/x-fhir-query"
)

var (
	// idPattern is FHIR's id, less a leading dot: it names the store's file
	// (<id>.json), which a dot would hide (the store skips dot files, as a ConfigMap
	// volume's ..data is one), and the ConfigMap key the operator renders.
	idPattern = regexp.MustCompile(`^[A-Za-z0-9\-][A-Za-z0-9\-.]{0,63}$`)
	// codePattern is what _query={code} may name.
	codePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_\-.]{0,63}$`)
	// paramPattern is a declared parameter's name: never one of the search's own
	// (_count, _page, _query…), which a value could then set.
	paramPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-]{0,63}$`)
	typePattern  = regexp.MustCompile(`^[A-Z][A-Za-z]{1,63}$`)
	// placeholderPattern is the one FHIRPath the template may inject: a declared
	// parameter, {{%name}}.
	placeholderPattern = regexp.MustCompile(`\{\{\s*%([A-Za-z][A-Za-z0-9\-]{0,63})\s*\}\}`)
)

// reservedNames are search parameters a template must not set: they steer the
// gateway's own paging and dispatch, not the members' search.
var reservedNames = []string{"_query", "_page", "_format"}

// Param is one declared in-parameter.
type Param struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
}

// Definition is one stored query, validated.
type Definition struct {
	ID       string
	Code     string
	URL      string
	Version  string
	Resource string
	Params   []Param
	// Template is the expression as written; pairs is it parsed.
	Template string
	pairs    []pair
	// Raw is the definition as stored (and sent to the members).
	Raw []byte
	// Digest is the SHA-256 (hex) of its canonical JSON without meta and text: what
	// the drift check compares with a member's copy.
	Digest string
}

// pair is one search parameter of the template: a literal name, and a value of
// literal parts (already query-escaped, as written) and placeholders.
type pair struct {
	name  string
	parts []part
}

type part struct {
	literal string
	param   string // set for a placeholder
}

// operationDefinition is what is read of an uploaded definition.
type operationDefinition struct {
	ResourceType string   `json:"resourceType"`
	ID           string   `json:"id"`
	URL          string   `json:"url"`
	Version      string   `json:"version"`
	Kind         string   `json:"kind"`
	Code         string   `json:"code"`
	Resource     []string `json:"resource"`
	Parameter    []struct {
		Name string `json:"name"`
		Use  string `json:"use"`
		Min  int    `json:"min"`
	} `json:"parameter"`
	Extension []struct {
		URL             string `json:"url"`
		ValueExpression *struct {
			Language   string `json:"language"`
			Expression string `json:"expression"`
		} `json:"valueExpression"`
	} `json:"extension"`
}

// ErrInvalid wraps every reason a definition is refused.
var ErrInvalid = errors.New("invalid stored query")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ErrTooLarge is a definition longer than MaxDefinitionBytes.
var ErrTooLarge = fmt.Errorf("%w: the OperationDefinition is longer than %d bytes", ErrInvalid, MaxDefinitionBytes)

// Parse reads and validates one stored query. Every error wraps ErrInvalid and says
// which element is wrong.
func Parse(data []byte) (*Definition, error) {
	if len(data) > MaxDefinitionBytes {
		return nil, ErrTooLarge
	}
	var od operationDefinition
	if err := json.Unmarshal(data, &od); err != nil {
		return nil, invalid("not an OperationDefinition in JSON: %v", err)
	}
	switch {
	case od.ResourceType != "OperationDefinition":
		return nil, invalid("resourceType must be OperationDefinition")
	case od.Kind != "query":
		return nil, invalid("kind must be query (a named query, run with _query)")
	case !idPattern.MatchString(od.ID):
		return nil, invalid("id must be a FHIR id (1 to 64 of A-Z a-z 0-9 - .) that does not start with a dot")
	case !codePattern.MatchString(od.Code):
		return nil, invalid("code must be 1 to 64 of A-Z a-z 0-9 _ - . starting with a letter or digit: clients name it in _query")
	case len(od.Resource) != 1 || !typePattern.MatchString(od.Resource[0]):
		return nil, invalid("resource must name one resource type, the one the template searches")
	case len(od.Parameter) > MaxParameters:
		return nil, invalid("more than %d parameters", MaxParameters)
	}
	d := &Definition{ID: od.ID, Code: od.Code, URL: od.URL, Version: od.Version, Resource: od.Resource[0]}
	for i, p := range od.Parameter {
		if p.Use != "in" {
			continue
		}
		if !paramPattern.MatchString(p.Name) {
			return nil, invalid("parameter[%d].name %q must be a letter then letters, digits or -: a name starting with _ would set the search's own parameters", i, p.Name)
		}
		if slices.ContainsFunc(d.Params, func(q Param) bool { return q.Name == p.Name }) {
			return nil, invalid("parameter[%d].name %q is declared twice", i, p.Name)
		}
		d.Params = append(d.Params, Param{Name: p.Name, Required: p.Min > 0})
	}
	var expr string
	found := 0
	for _, e := range od.Extension {
		if e.URL != TemplateExtension {
			continue
		}
		found++
		if e.ValueExpression == nil || e.ValueExpression.Language != TemplateLanguage {
			return nil, invalid("the extension %s must hold a valueExpression of language %s", TemplateExtension, TemplateLanguage)
		}
		expr = e.ValueExpression.Expression
	}
	if found != 1 {
		return nil, invalid("one extension %s must carry the template", TemplateExtension)
	}
	if err := d.parseTemplate(expr); err != nil {
		return nil, err
	}
	digest, err := Digest(data)
	if err != nil {
		return nil, invalid("%v", err)
	}
	d.Template, d.Raw, d.Digest = expr, data, digest
	return d, nil
}

// parseTemplate reads "Type?name=value&…". A placeholder may stand in a value only,
// for a declared parameter only: one in a name, or anything else between {{ and }},
// would let a client's value add or change search parameters, and is refused.
func (d *Definition) parseTemplate(expr string) error {
	if len(expr) > MaxTemplateBytes {
		return invalid("the template is longer than %d bytes", MaxTemplateBytes)
	}
	typ, query, ok := strings.Cut(expr, "?")
	if !ok || typ != d.Resource {
		return invalid("the template must be %s?{search}: it searches the resource the definition names", d.Resource)
	}
	if strings.ContainsAny(query, "#\r\n\t ") {
		return invalid("the template must be a search query: no fragment, space or line break")
	}
	for raw := range strings.SplitSeq(query, "&") {
		if raw == "" {
			continue
		}
		if len(d.pairs) == MaxTemplatePairs {
			return invalid("the template holds more than %d parameters", MaxTemplatePairs)
		}
		k, v, ok := strings.Cut(raw, "=")
		name, err := url.QueryUnescape(k)
		if !ok || err != nil || name == "" {
			return invalid("the template's parameter %q is not name=value", raw)
		}
		if strings.Contains(k, "{{") || strings.Contains(k, "}}") || strings.Contains(name, "{{") {
			return invalid("the template puts a placeholder in the name %q: a parameter's value could inject other parameters", name)
		}
		if slices.Contains(reservedNames, name) || name == "_count" {
			return invalid("the template sets %s, which the gateway owns", name)
		}
		p := pair{name: k}
		rest := v
		for rest != "" {
			loc := placeholderPattern.FindStringSubmatchIndex(rest)
			lit := rest
			if loc != nil {
				lit = rest[:loc[0]]
			}
			if strings.Contains(lit, "{{") || strings.Contains(lit, "}}") {
				return invalid("the template's value of %s holds an expression other than {{%%parameter}}: only a declared parameter may be injected", name)
			}
			if _, err := url.QueryUnescape(lit); err != nil {
				return invalid("the template's value of %s is not query-escaped", name)
			}
			if lit != "" {
				p.parts = append(p.parts, part{literal: lit})
			}
			if loc == nil {
				break
			}
			param := rest[loc[2]:loc[3]]
			if !slices.ContainsFunc(d.Params, func(q Param) bool { return q.Name == param }) {
				return invalid("the template injects %%%s, which is not a declared in-parameter", param)
			}
			p.parts = append(p.parts, part{param: param})
			rest = rest[loc[1]:]
		}
		d.pairs = append(d.pairs, p)
	}
	if len(d.pairs) == 0 {
		return invalid("the template searches nothing")
	}
	return nil
}

// Digest is the SHA-256 (hex) of a definition's canonical JSON (keys sorted, no
// insignificant space) without meta and text, which a member may set on its copy.
func Digest(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("not a JSON object: %w", err)
	}
	delete(v, "meta")
	delete(v, "text")
	canon, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}
