package proxy

import (
	"strings"
	"testing"
)

func TestTheRewriterFindsTheBaseAcrossParts(t *testing.T) {
	old, new := "http://10.0.0.1:8080/fhir", "https://gw/nodes/a/fhir"
	body := `{"a":"` + old + `/P/1","b":"` + old + `","c":"http://10.0.0.1:8080/fhi","d":"` + old + `"}`
	want := strings.ReplaceAll(body, old, new)
	for size := 1; size <= len(body); size++ {
		rw := &rewriter{old: []byte(old), new: []byte(new)}
		var out strings.Builder
		for i := 0; i < len(body); i += size {
			out.Write(rw.process([]byte(body[i:min(i+size, len(body))]), false))
		}
		out.Write(rw.process(nil, true))
		if out.String() != want {
			t.Fatalf("parts of %d bytes: %s", size, out.String())
		}
	}
	// Nothing that cannot begin the base is held back.
	rw := &rewriter{old: []byte(old), new: []byte(new)}
	if got := string(rw.process([]byte(`{"part":1}`+"\n"), false)); got != `{"part":1}`+"\n" {
		t.Fatalf("held back %q", got)
	}
}
