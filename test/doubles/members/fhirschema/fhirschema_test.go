package fhirschema

import (
	"strings"
	"testing"
)

func TestTheSchemaTellsValidFromInvalidR4(t *testing.T) {
	valid := `{"resourceType":"Bundle","type":"searchset","total":1,` +
		`"link":[{"relation":"self","url":"http://gw.test/fhir/Patient"}],` +
		`"entry":[{"fullUrl":"http://gw.test/nodes/a/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","birthDate":"1970-01-02"},"search":{"mode":"match"}}]}`
	cases := []struct {
		name, body string
		want       string // "" for valid; else a piece of the problem
	}{
		{"a searchset Bundle is valid", valid, ""},
		{"an OperationOutcome is valid", `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found","diagnostics":"x"}]}`, ""},
		{"a Bundle of an unknown type is refused", strings.Replace(valid, `"searchset"`, `"resultset"`, 1), "/type"},
		{"a link without its url as a string is refused", strings.Replace(valid, `"url":"http://gw.test/fhir/Patient"`, `"url":7`, 1), "/link/0/url"},
		{"a total that is a string is refused", strings.Replace(valid, `"total":1`, `"total":"1"`, 1), "/total"},
		{"an unknown search mode is refused", strings.Replace(valid, `"mode":"match"`, `"mode":"hit"`, 1), "/entry/0/search/mode"},
		{"a bad date in an entry's resource is refused", strings.Replace(valid, `1970-01-02`, `02/01/1970`, 1), "/entry/0/resource"},
		{"an element that is not R4 is refused", strings.Replace(valid, `"total":1`, `"total":1,"pages":3`, 1), "pages"},
		{"meta.federation is not R4", strings.Replace(valid, `"type":"searchset"`, `"meta":{"federation":[]},"type":"searchset"`, 1), "federation"},
		{"an issue of an unknown severity is refused", `{"resourceType":"OperationOutcome","issue":[{"severity":"bad","code":"x"}]}`, "severity"},
		{"an issue of an unknown code is refused", `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"oops"}]}`, "code"},
		{"an extension with a value of no FHIR type is refused", strings.Replace(valid, `"type":"searchset"`, `"meta":{"extension":[{"url":"u","valueNope":"x"}]},"type":"searchset"`, 1), "valueNope"},
		{"an OperationOutcome without an issue is refused", `{"resourceType":"OperationOutcome"}`, "issue"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate([]byte(c.body))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted %s", c.body)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("refused for another reason than %q: %v", c.want, err)
			}
		})
	}
}

func TestOnlyMetaFederationIsForgiven(t *testing.T) {
	withFederation := `{"resourceType":"Bundle","meta":{"federation":[{"id":"a"}]},"type":"searchset"}`
	if err := Validate([]byte(withFederation)); err == nil {
		t.Fatal("meta.federation passed strict validation")
	}
	if err := ValidateFederated([]byte(withFederation)); err != nil {
		t.Fatalf("meta.federation was not forgiven: %v", err)
	}
	for _, body := range []string{
		`{"resourceType":"Bundle","meta":{"federation":[],"other":1},"type":"searchset"}`,
		`{"resourceType":"Bundle","meta":{"federation":[]},"type":"searchset","federation":[]}`,
		`{"resourceType":"Bundle","meta":{"federation":[]},"type":"nope"}`,
	} {
		if err := ValidateFederated([]byte(body)); err == nil {
			t.Fatalf("ValidateFederated accepted %s", body)
		}
	}
}

func TestADocumentWithoutAKnownResourceTypeIsAnError(t *testing.T) {
	for _, body := range []string{`[]`, `{}`, `{"resourceType":"NoSuchThing"}`, `not json`} {
		if _, err := Check([]byte(body)); err == nil {
			t.Fatalf("Check(%s) gave no error", body)
		}
	}
}
