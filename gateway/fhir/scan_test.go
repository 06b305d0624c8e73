package fhir

import (
	"bytes"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// pagesAgree reports whether ScanPage and DecodePage read body alike.
func pagesAgree(t *testing.T, body []byte) {
	t.Helper()
	if caseVariantKey(body) {
		// FHIR's JSON keys are case-sensitive: "resourcetype" is no resourceType.
		// encoding/json matches keys without case; ScanPage, rightly, does not.
		return
	}
	want, werr := DecodePage(body, config.DefaultMaxMemberEntries)
	got, gerr := ScanPage(body, config.DefaultMaxMemberEntries)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%s: DecodePage error %v, ScanPage error %v", body, werr, gerr)
	}
	if werr != nil {
		return
	}
	if (want.Total == nil) != (got.Total == nil) || (want.Total != nil && *want.Total != *got.Total) || want.Next != got.Next || len(want.Entry) != len(got.Entry) {
		t.Fatalf("%s: DecodePage %+v, ScanPage %+v", body, want, got)
	}
	for i := range want.Entry {
		w, g := want.Entry[i], got.Entry[i]
		if !bytes.Equal(w.Resource, g.Resource) || (w.Search == nil) != (g.Search == nil) ||
			(w.Search != nil && (w.Search.Mode != g.Search.Mode || !bytes.Equal(w.Search.Score, g.Search.Score))) {
			t.Fatalf("%s: entry %d: DecodePage %+v, ScanPage %+v", body, i, w, g)
		}
	}
}

// caseVariantKey reports whether body names a key the page readers look for with
// another case.
func caseVariantKey(body []byte) bool {
	lower := bytes.ToLower(body)
	for _, k := range []string{"resourcetype", "type", "total", "link", "entry", "resource", "search", "mode", "score", "relation", "url"} {
		if bytes.Count(lower, []byte(`"`+k+`"`)) != bytes.Count(body, []byte(`"`+fix(k)+`"`)) {
			return true
		}
	}
	return false
}

// fix is a lower-case key as FHIR spells it.
func fix(k string) string {
	if k == "resourcetype" {
		return "resourceType"
	}
	return k
}

var pageSeeds = []string{
	`{"resourceType":"Bundle","type":"searchset","total":2,"link":[{"relation":"self","url":"s"},{"relation":"next","url":"n"}],"entry":[{"fullUrl":"x","resource":{"resourceType":"Patient","id":"1","name":[{"family":"O\"B"}]},"search":{"mode":"match","score":0.5}},{"resource":{"resourceType":"Patient","id":"2"}}]}`,
	` { "entry" : [ { "search" : { "mode" : "outcome" } , "resource" : { "resourceType" : "OperationOutcome" } } ] , "type" : "searchset" , "resourceType" : "Bundle" } `,
	`{"resourceType":"Bundle","type":"searchset","total":null,"link":null,"entry":null}`,
	`{"resourceType":"Bundle","type":"searchset","entry":[null,{"resource":null,"search":null}]}`,
	`{"resourceType":"Bundle","type":"searchset","entry":[7]}`,
	`{"resourceType":"Bundle","type":"searchset","entry":{}}`,
	`{"resourceType":"Bundle","type":"searchset","total":1.5}`,
	`{"resourceType":"Bundle","type":"searchset","total":-1}`,
	`{"resourceType":"Bundle","type":"searchset","total":"3"}`,
	`{"resourceType":"Bundle","type":"transaction"}`,
	`{"resourceType":7,"type":"searchset"}`,
	`{"resource\u0054ype":"Bundle","type":"searchset"}`,
	`{"resourceType":"Bundle","type":"searchset","entry":[{"search":{"mode":7}}]}`,
	`{"resourceType":"Bundle","type":"searchset","link":[{"relation":"next","url":5}]}`,
	`{"resourceType":"Bundle","type":"searchset","resourceType":"Patient"}`,
	`{"resourceType":"Bundle","type":"searchset"`,
	`[]`, `null`, `"x"`, ``, `<html>`,
}

func TestScanPageReadsAPageAsDecodingItDoes(t *testing.T) {
	for _, s := range pageSeeds {
		pagesAgree(t, []byte(s))
	}
}

// FuzzScanPage checks that ScanPage reads every body as DecodePage does.
func FuzzScanPage(f *testing.F) {
	for _, s := range pageSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) { pagesAgree(t, []byte(body)) })
}

func TestScanPageReadsKeysWithTheirCase(t *testing.T) {
	if _, err := ScanPage([]byte(`{"resourcetype":"Bundle","type":"searchset"}`), config.DefaultMaxMemberEntries); err == nil {
		t.Fatal("a resourcetype key was read as resourceType")
	}
	pg, err := ScanPage([]byte(`{"resourceType":"Bundle","type":"searchset","Entry":[{"resource":{}}]}`), config.DefaultMaxMemberEntries)
	if err != nil || len(pg.Entry) != 0 {
		t.Fatalf("an Entry key was read as entry: %+v %v", pg, err)
	}
}
