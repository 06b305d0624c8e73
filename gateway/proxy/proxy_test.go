package proxy

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestCopyHeaders(t *testing.T) {
	for _, c := range []struct {
		name string
		src  http.Header
		drop []string
		want http.Header
	}{
		{"end-to-end headers are copied with all their values",
			http.Header{"Accept": {"a", "b"}, "X-Trace": {"1"}},
			nil,
			http.Header{"Accept": {"a", "b"}, "X-Trace": {"1"}}},
		{"hop-by-hop headers are left behind",
			http.Header{"Connection": {"close"}, "Keep-Alive": {"timeout=5"}, "Te": {"trailers"}, "Transfer-Encoding": {"chunked"}, "Accept": {"a"}},
			nil,
			http.Header{"Accept": {"a"}}},
		{"headers the Connection header names are left behind, whatever their case",
			http.Header{"Connection": {"x-hop, X-Other ,"}, "X-Hop": {"1"}, "X-Other": {"2"}, "X-Keep": {"3"}},
			nil,
			http.Header{"X-Keep": {"3"}}},
		{"dropped headers are left behind",
			http.Header{"Authorization": {"Bearer t"}, "Cookie": {"s=1"}, "Accept": {"a"}},
			ClientCredentials,
			http.Header{"Accept": {"a"}}},
		{"a header without values stays without values",
			http.Header{"User-Agent": nil},
			nil,
			http.Header{"User-Agent": nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := http.Header{}
			CopyHeaders(dst, c.src, c.drop...)
			if !reflect.DeepEqual(dst, c.want) {
				t.Fatalf("got %v, want %v", dst, c.want)
			}
		})
	}
}

func TestCopiedHeadersShareNoValues(t *testing.T) {
	src := http.Header{"A": {"1"}, "B": {"2"}, "C": {"3", "4"}}
	dst := http.Header{}
	CopyHeaders(dst, src)
	// Appending to one copied header must neither write over another's value nor
	// reach back into the source.
	dst["A"] = append(dst["A"], "x")
	dst["C"][0] = "y"
	if got := dst["B"]; len(got) != 1 || got[0] != "2" {
		t.Fatalf("appending to A changed B: %v", dst)
	}
	if src["C"][0] != "3" {
		t.Fatalf("writing the copy changed the source: %v", src)
	}
}

func TestCopyingHeadersAllocatesOneArray(t *testing.T) {
	src := http.Header{"Accept": {"a"}, "Accept-Encoding": {"gzip"}, "User-Agent": {"u"}, "Connection": {"keep-alive"}, "Authorization": {"t"}}
	dst := http.Header{"Accept": nil, "Accept-Encoding": nil, "User-Agent": nil}
	// The destination's keys exist already, so that the map does not grow: what is left
	// is CopyHeaders' own.
	if n := testing.AllocsPerRun(100, func() { CopyHeaders(dst, src, ClientCredentials...) }); n > 2 {
		t.Fatalf("copyHeaders allocates %v times per call, want at most 2 (the values, the Connection names)", n)
	}
}

// ReadPrefix reads the whole body when it fits the buffer, else the buffer's worth
// (a chunked body one byte more, to tell), and fails a body shorter than announced.
func TestReadPrefixReadsTheBodyOrItsBufferedPrefix(t *testing.T) {
	cases := []struct {
		name, body string
		length     int64
		limit      int64
		want       string
		whole      bool
		fails      bool
	}{
		{"a known length within the buffer", "hello", 5, 8, "hello", true, false},
		{"a known length equal to the buffer", "hello", 5, 5, "hello", true, false},
		{"a known length past the buffer", "hello world", 11, 5, "hello", false, false},
		{"a chunked body within the buffer", "hello", -1, 8, "hello", true, false},
		{"a chunked body of the buffer's length", "hello", -1, 5, "hello", true, false},
		{"a chunked body past the buffer", "hello world", -1, 5, "hello ", false, false},
		{"an empty chunked body", "", -1, 5, "", true, false},
		{"a body shorter than announced", "hel", 5, 8, "", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, whole, err := ReadPrefix(strings.NewReader(c.body), c.length, c.limit)
			if (err != nil) != c.fails || string(got) != c.want || whole != c.whole {
				t.Fatalf("readPrefix = %q, whole %v, err %v; want %q, whole %v, fails %v", got, whole, err, c.want, c.whole, c.fails)
			}
		})
	}
}
