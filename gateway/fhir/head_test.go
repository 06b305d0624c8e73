package fhir

import (
	"encoding/json"
	"testing"
)

func TestReadHeadAgreesWithEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`{"resourceType":"Patient","id":"1"}`,
		`{"id":"a-1","meta":{"id":"not-this","tag":[{"code":"}"}]},"resourceType":"Observation"}`,
		` { "name" : [ { "family" : "O\"Brien" } ] , "resourceType" : "Patient" , "id" : "x.y" } `,
		`{"text":{"div":"<div>{[\"id\":\"no\"]}</div>"},"id":"7","resourceType":"Patient"}`,
		`{"resourceType":"Pat\u0069ent","id":"1"}`,
		`{"resourceType":"Patient","active":true,"multipleBirthInteger":2,"deceasedBoolean":false,"id":"9"}`,
		`{"resourceType":"Patient"}`,
		`{"id":"1"}`,
		`{}`,
		`[]`,
		`{"resourceType":7,"id":"1"}`,
	} {
		var want Head
		err := json.Unmarshal([]byte(raw), &want)
		wantOK := err == nil && want.ResourceType != ""
		got, ok := ReadHead([]byte(raw))
		if ok != wantOK || (ok && got != want) {
			t.Errorf("ReadHead(%s) = %+v, %v; encoding/json reads %+v, %v", raw, got, ok, want, wantOK)
		}
	}
}
