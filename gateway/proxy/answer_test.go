package proxy

import (
	"net/http"
	"testing"
)

// TestJSONDepthTellsAWholeDocumentFromACutOne, fed whole and in parts of every size.
func TestJSONDepthTellsAWholeDocumentFromACutOne(t *testing.T) {
	for doc, whole := range map[string]bool{
		`{"a":[1,{"b":"x}]\"y"}],"c":"\\"}`: true,
		`{"a":"[{"}`:                        true,
		` `:                                 true,
		`{"a":[1,2]`:                        false,
		`{"a":"b`:                           false,
		`{"a":"b\"}`:                        false,
		`{"a":"b\\"}`:                       true,
		`{"a":"\\\"}"}`:                     true,
		`]`:                                 false,
	} {
		for size := 1; size <= len(doc); size++ {
			var j jsonDepth
			for i := 0; i < len(doc); i += size {
				j.feed([]byte(doc[i:min(i+size, len(doc))]))
			}
			if j.whole() != whole {
				t.Errorf("%s in parts of %d: whole %v", doc, size, j.whole())
			}
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for ae, want := range map[string]bool{
		"gzip": true, "gzip, deflate, br": true, "br;q=1.0, gzip;q=0.8, *;q=0.1": true, "*": true, "x-gzip": true,
		"": false, "identity": false, "br": false, "gzip;q=0": false, "*;q=0": false, "gzip;q=0, *": false, "deflate, *;q=0": false,
	} {
		if got := AcceptsGzip(http.Header{"Accept-Encoding": {ae}}); got != want {
			t.Errorf("%q: %v, want %v", ae, got, want)
		}
	}
}
