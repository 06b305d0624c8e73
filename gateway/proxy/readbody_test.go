package proxy

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// brokenReader yields its text, then fails as a connection reset mid-body does.
type brokenReader struct{ r io.Reader }

var errReset = errors.New("connection reset")

func (b *brokenReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errReset
	}
	return n, err
}

func TestReadBody(t *testing.T) {
	const max = 10
	for _, c := range []struct {
		name    string
		body    io.Reader
		length  int64
		want    string
		wantErr error
	}{
		{"an answer of the length it announced is read whole", strings.NewReader("0123456789"), 10, "0123456789", nil},
		{"an empty answer is read as empty", strings.NewReader(""), 0, "", nil},
		{"an answer of unknown length is read whole", strings.NewReader("01234"), -1, "01234", nil},
		{"an answer of unknown length is read to one byte past the cap", strings.NewReader("0123456789abc"), -1, "0123456789a", nil},
		{"an answer announced past the cap is read to one byte past it", strings.NewReader("0123456789abc"), 13, "0123456789a", nil},
		{"an answer longer than it announced is read to one byte past the cap", strings.NewReader("0123456789abc"), 3, "0123456789a", nil},
		{"an answer that breaks off returns what came and the error", &brokenReader{strings.NewReader("012")}, 10, "012", errReset},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadBody(&http.Response{Body: io.NopCloser(c.body), ContentLength: c.length}, max)
			if string(got) != c.want || !errors.Is(err, c.wantErr) {
				t.Fatalf("got %q, %v; want %q, %v", got, err, c.want, c.wantErr)
			}
		})
	}
}
