package double_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
)

// echo is a profile of plain text: it answers the request's path.
type echo struct{ marker string }

func (e echo) Answer(r double.Request) double.Answer {
	return double.Answer{Status: http.StatusOK, ContentType: "text/plain", Body: []byte("path " + r.Path + " body " + string(r.Body))}
}

func (e echo) Error(status int, text string) double.Answer {
	return double.Answer{Status: status, ContentType: "text/plain", Body: []byte("error: " + text + " " + e.marker)}
}

func (e echo) Malformed() double.Answer {
	return double.Answer{Status: http.StatusOK, ContentType: "text/plain", Body: []byte("\x00" + e.marker)}
}

const marker = "ECHO-MARKER"

func start(t *testing.T, k double.Knobs) *double.Server {
	t.Helper()
	return double.Start(t, double.Options{Name: "echo", Marker: marker, MaxBodyBytes: 64, Knobs: k}, echo{marker})
}

// get is one request's status and body (status 0 when no answer came).
func get(t *testing.T, ctx context.Context, url string, body string) (int, string, error) {
	t.Helper()
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test", "yes")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestKnobs(t *testing.T) {
	ctx := t.Context()
	t.Run("a normal answer is the profile's, and the request is logged whole", func(t *testing.T) {
		s := start(t, double.Knobs{})
		status, body, err := get(t, ctx, s.URL()+"/a?x=1&x=2", "hello")
		if err != nil || status != 200 || body != "path /a body hello" {
			t.Fatalf("got %v %q %v", status, body, err)
		}
		r, ok := s.Last()
		if !ok || r.Method != "POST" || r.Path != "/a" || r.RawQuery != "x=1&x=2" || len(r.Query["x"]) != 2 || r.Header.Get("X-Test") != "yes" || string(r.Body) != "hello" {
			t.Fatalf("logged %+v", r)
		}
		if s.Requests() != 1 || len(s.Log()) != 1 {
			t.Fatalf("requests %d log %d", s.Requests(), len(s.Log()))
		}
	})
	t.Run("a status of 400 or more is the profile's error with the marker", func(t *testing.T) {
		s := start(t, double.Knobs{Status: 503})
		status, body, err := get(t, ctx, s.URL()+"/a", "")
		if err != nil || status != 503 || !strings.Contains(body, marker) || !strings.HasPrefix(body, "error: echo answers 503") {
			t.Fatalf("got %v %q %v", status, body, err)
		}
	})
	t.Run("a status below 400 replaces the answer's status only", func(t *testing.T) {
		s := start(t, double.Knobs{Status: 202})
		status, body, err := get(t, ctx, s.URL()+"/a", "")
		if err != nil || status != 202 || body != "path /a body " {
			t.Fatalf("got %v %q %v", status, body, err)
		}
	})
	t.Run("a body over the cap is a 413", func(t *testing.T) {
		s := start(t, double.Knobs{})
		status, body, err := get(t, ctx, s.URL()+"/a", strings.Repeat("x", 65))
		if err != nil || status != 413 || !strings.Contains(body, marker) {
			t.Fatalf("got %v %q %v", status, body, err)
		}
		if r, _ := s.Last(); len(r.Body) != 64 {
			t.Fatalf("logged %d bytes", len(r.Body))
		}
	})
	t.Run("malformed is a 200 of the profile's malformed body", func(t *testing.T) {
		s := start(t, double.Knobs{Fault: double.FaultMalformed})
		status, body, err := get(t, ctx, s.URL()+"/a", "")
		if err != nil || status != 200 || body != "\x00"+marker {
			t.Fatalf("got %v %q %v", status, body, err)
		}
	})
	t.Run("reset cuts the body and resets the connection", func(t *testing.T) {
		s := start(t, double.Knobs{Fault: double.FaultReset})
		status, body, err := get(t, ctx, s.URL()+"/abcdefgh", "")
		if err == nil {
			t.Fatalf("read the whole answer: %q", body)
		}
		if status != 200 {
			t.Fatalf("status line not sent: %d", status)
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err %v, want a reset or an unexpected EOF", err)
		}
	})
	t.Run("hang answers nothing until the caller gives up", func(t *testing.T) {
		s := start(t, double.Knobs{Fault: double.FaultHang})
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, _, err := get(t, cctx, s.URL()+"/a", "")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want the caller's deadline", err)
		}
		if s.Requests() != 1 {
			t.Fatalf("requests %d", s.Requests())
		}
	})
	t.Run("a delay past the caller's deadline answers nothing", func(t *testing.T) {
		s := start(t, double.Knobs{Delay: time.Hour})
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, _, err := get(t, cctx, s.URL()+"/a", ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a short delay answers after it", func(t *testing.T) {
		s := start(t, double.Knobs{Delay: 20 * time.Millisecond})
		t0 := time.Now()
		status, _, err := get(t, ctx, s.URL()+"/a", "")
		if err != nil || status != 200 || time.Since(t0) < 20*time.Millisecond {
			t.Fatalf("got %v %v after %s", status, err, time.Since(t0))
		}
	})
	t.Run("refused leaves nothing listening, and turning it off listens again", func(t *testing.T) {
		s := start(t, double.Knobs{Fault: double.FaultRefused})
		if _, _, err := get(t, ctx, s.URL()+"/a", ""); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("err %v, want refused", err)
		}
		if err := s.SetKnobs(double.Knobs{}); err != nil {
			t.Fatal(err)
		}
		if status, _, err := get(t, ctx, s.URL()+"/a", ""); err != nil || status != 200 {
			t.Fatalf("after refused off: %v %v", status, err)
		}
		if err := s.SetKnobs(double.Knobs{Fault: double.FaultRefused}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := get(t, ctx, s.URL()+"/a", ""); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("err %v, want refused again", err)
		}
		if s.Knobs().Fault != double.FaultRefused {
			t.Fatalf("knobs %+v", s.Knobs())
		}
		s.Close()
		if err := s.SetKnobs(double.Knobs{}); err == nil {
			t.Fatal("a closed double listened again")
		}
	})
}

func TestKnobsValidate(t *testing.T) {
	for _, tc := range []struct {
		k    double.Knobs
		want string
	}{
		{double.Knobs{}, ""},
		{double.Knobs{Fault: "slow"}, `fault "slow"`},
		{double.Knobs{Fault: double.FaultHold}, ""},
		{double.Knobs{Status: 99}, "status 99"},
		{double.Knobs{Status: 600}, "status 600"},
		{double.Knobs{Delay: -1}, "delay -1ns"},
		{double.Knobs{RetryAfter: "2"}, "without a status"},
	} {
		err := tc.k.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: err %v, want %q", tc.k, err, tc.want)
		}
	}
	if _, err := double.New(double.Options{Knobs: double.Knobs{Fault: "slow"}}, echo{}); err == nil {
		t.Error("New took a bad knob")
	}
}

func TestTruncated(t *testing.T) {
	if got := string(double.Truncated([]byte(`{"a":"bc"}`), "M")); got != `{"a":M` {
		t.Fatalf("got %q", got)
	}
}

func TestScriptRetryAfterAndRelease(t *testing.T) {
	ctx := t.Context()
	t.Run("a script answers the next requests one each, then the standing knobs", func(t *testing.T) {
		s := start(t, double.Knobs{})
		s.Script(t, double.Knobs{Status: 503, RetryAfter: "2"}, double.Knobs{Status: 429, RetryAfter: "2"})
		var got []int
		for range 3 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/a", nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if (res.StatusCode != 200) != (res.Header.Get("Retry-After") == "2") {
				t.Errorf("%d with Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
			}
			got = append(got, res.StatusCode)
		}
		if got[0] != 503 || got[1] != 429 || got[2] != 200 {
			t.Fatalf("statuses %v", got)
		}
		if err := s.ScriptTimes(double.Knobs{Status: 500}, 2); err != nil {
			t.Fatal(err)
		}
		for _, want := range []int{500, 500, 200} {
			if status, _, err := get(t, ctx, s.URL()+"/a", ""); err != nil || status != want {
				t.Fatalf("got %d %v, want %d", status, err, want)
			}
		}
		if err := s.ScriptTimes(double.Knobs{Fault: double.FaultRefused}, 1); err == nil {
			t.Fatal("a script held refused")
		}
	})
	t.Run("turning hold off answers the held requests; a caller giving up is seen", func(t *testing.T) {
		s := start(t, double.Knobs{Fault: double.FaultHold})
		done := make(chan int, 1)
		go func() {
			status, _, _ := get(t, ctx, s.URL()+"/a", "")
			done <- status
		}()
		for s.Held() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		s.Set(t, double.Knobs{})
		if status := <-done; status != 200 {
			t.Fatalf("released: %d", status)
		}
		s.Set(t, double.Knobs{Fault: double.FaultHang})
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, err := get(t, cctx, s.URL()+"/a", ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		select {
		case <-s.Cancelled():
		case <-time.After(2 * time.Second):
			t.Fatal("the double did not see its caller give up")
		}
	})
	t.Run("a double without a listener cannot refuse", func(t *testing.T) {
		s, err := double.NewHandler(double.Options{Name: "echo"}, echo{marker})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.SetKnobs(double.Knobs{Fault: double.FaultRefused}); err == nil {
			t.Fatal("a handler refused")
		}
	})
}

func TestARouteScopesTheKnobs(t *testing.T) {
	ctx := t.Context()
	s := start(t, double.Knobs{Route: "POST /a/{id}", Status: 500})
	if status, _, err := get(t, ctx, s.URL()+"/a/1", "x"); err != nil || status != 500 {
		t.Fatalf("the route: %d %v", status, err)
	}
	for _, c := range []struct{ path, body string }{{"/a/1", ""}, {"/b/1", "x"}, {"/a", "x"}} {
		if status, _, err := get(t, ctx, s.URL()+c.path, c.body); err != nil || status != 200 {
			t.Fatalf("%s %q off the route: %d %v", c.path, c.body, status, err)
		}
	}
	s.Script(t, double.Knobs{Route: "GET /b", Status: 503})
	if status, _, _ := get(t, ctx, s.URL()+"/a/1", ""); status != 200 {
		t.Fatalf("a script step was taken by a request off its route: %d", status)
	}
	if status, _, _ := get(t, ctx, s.URL()+"/b", ""); status != 503 {
		t.Fatalf("the scripted route: %d", status)
	}
	for _, k := range []double.Knobs{{Route: "GET /a", Fault: double.FaultRefused}, {Route: "GET /{"}} {
		if err := k.Validate(); err == nil {
			t.Errorf("%+v validated", k)
		}
	}
}
