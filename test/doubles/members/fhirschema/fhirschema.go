// Package fhirschema validates FHIR R4 JSON against HL7's official R4 JSON schema
// (fhir.schema.json, kept gzipped in testdata/ with its source and licence named in
// testdata/README.md), with a maintained JSON-Schema validator
// (github.com/santhosh-tekuri/jsonschema/v6). Tests use it on every Bundle and
// OperationOutcome the gateway answers.
//
// A resource is validated against the schema's definition of its own resourceType,
// not against the schema's top-level oneOf of every resource type: a Bundle with one
// bad field then fails with that field's location, not with "none of 147 matched".
package fhirschema

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

//go:embed testdata/fhir.schema.json.gz
var schemaGz []byte

// schemaURL is where the compiler files the schema; it is never fetched.
const schemaURL = "https://ferrofed.invalid/fhir.schema.json"

var (
	loadOnce sync.Once
	compiler *jsonschema.Compiler
	loadErr  error
	mu       sync.Mutex
	compiled = map[string]*jsonschema.Schema{}
)

func load() {
	zr, err := gzip.NewReader(bytes.NewReader(schemaGz))
	if err != nil {
		loadErr = fmt.Errorf("fhirschema: unzip the schema: %w", err)
		return
	}
	doc, err := jsonschema.UnmarshalJSON(zr)
	if err != nil {
		loadErr = fmt.Errorf("fhirschema: read the schema: %w", err)
		return
	}
	addFHIRVersion401(doc)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft6)
	if err := c.AddResource(schemaURL, doc); err != nil {
		loadErr = fmt.Errorf("fhirschema: add the schema: %w", err)
		return
	}
	compiler = c
}

// addFHIRVersion401 adds "4.0.1" to every enum of FHIR versions that ends at "4.0.0".
// The schema kept here is the 4.0.0 publication of R4's; 4.0.1, R4's technical
// correction and the version every R4 server declares, added itself to that value
// set. It is the one change made to the file (testdata/README.md).
func addFHIRVersion401(v any) {
	switch v := v.(type) {
	case map[string]any:
		if e, ok := v["enum"].([]any); ok && slices.Contains(e, any("4.0.0")) && !slices.Contains(e, any("4.0.1")) {
			v["enum"] = append(e, "4.0.1")
		}
		for _, c := range v {
			addFHIRVersion401(c)
		}
	case []any:
		for _, c := range v {
			addFHIRVersion401(c)
		}
	}
}

// schemaFor compiles (once) the schema's definition of one resource type.
func schemaFor(resourceType string) (*jsonschema.Schema, error) {
	loadOnce.Do(load)
	if loadErr != nil {
		return nil, loadErr
	}
	mu.Lock()
	defer mu.Unlock()
	if s, ok := compiled[resourceType]; ok {
		return s, nil
	}
	s, err := compiler.Compile(schemaURL + "#/definitions/" + resourceType)
	if err != nil {
		return nil, fmt.Errorf("fhirschema: no definition of resourceType %q: %w", resourceType, err)
	}
	compiled[resourceType] = s
	return s, nil
}

// Problem is one place where a document is not valid R4.
type Problem struct {
	// Location is the JSON pointer of the offending value ("" for the root).
	Location string
	// Message says what is wrong there.
	Message string
	// Extra lists the properties refused as unknown at Location, when that is the
	// problem.
	Extra []string
}

func (p Problem) String() string { return p.Location + ": " + p.Message }

// Check validates one FHIR JSON resource and returns every leaf problem; an empty
// list means valid R4. A body that is not a JSON object with a resourceType the
// schema defines is an error.
func Check(body []byte) ([]Problem, error) {
	var head struct {
		ResourceType string `json:"resourceType"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, fmt.Errorf("fhirschema: not a JSON object: %w", err)
	}
	if head.ResourceType == "" || strings.ContainsAny(head.ResourceType, "/#~") {
		return nil, errors.New("fhirschema: no resourceType")
	}
	s, err := schemaFor(head.ResourceType)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		return nil, fmt.Errorf("fhirschema: read the document: %w", err)
	}
	err = s.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	var out []Problem
	leaves(ve, &out)
	return out, nil
}

// leaves collects the errors without causes: the ones that say what is wrong.
func leaves(e *jsonschema.ValidationError, out *[]Problem) {
	if len(e.Causes) == 0 {
		p := Problem{Location: pointer(e.InstanceLocation), Message: e.Error()}
		if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			p.Extra = slices.Clone(ap.Properties)
		}
		*out = append(*out, p)
		return
	}
	for _, c := range e.Causes {
		leaves(c, out)
	}
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// Validate is Check with every problem an error.
func Validate(body []byte) error {
	ps, err := Check(body)
	if err != nil {
		return err
	}
	return joined(ps)
}

// ValidateFederated is Validate allowing the one documented exception: the
// gateway's meta.federation (docs/data-plane.md), which is not an element of R4's Meta.
// With [federation] strict_fhir the gateway leaves it out, and Validate applies.
func ValidateFederated(body []byte) error {
	ps, err := Check(body)
	if err != nil {
		return err
	}
	ps = slices.DeleteFunc(ps, func(p Problem) bool {
		return p.Location == "/meta" && len(p.Extra) == 1 && p.Extra[0] == "federation"
	})
	return joined(ps)
}

func joined(ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("not valid FHIR R4:")
	for _, p := range ps {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return errors.New(b.String())
}

// Warm compiles the schemas of the resources a gateway answers (Bundle,
// OperationOutcome, CapabilityStatement) now, so that a test that times a request
// does not time the compilation too.
func Warm() error {
	for _, t := range []string{"Bundle", "OperationOutcome", "CapabilityStatement"} {
		if _, err := schemaFor(t); err != nil {
			return err
		}
	}
	return nil
}
