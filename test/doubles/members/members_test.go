package members

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
)

// get sends a GET and reads and closes the body; it returns the status, 0 when no
// answer came.
func get(t *testing.T, ctx context.Context, url string) (int, []byte, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}

func TestAMemberAnswersASearchWithASearchset(t *testing.T) {
	m := Start(t, Options{ID: "node-a", Entries: 3})
	status, body, err := get(t, context.Background(), m.URL+"/Patient?name=x")
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		ResourceType, Type string
		Entry              []json.RawMessage
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	if status != 200 || b.ResourceType != "Bundle" || b.Type != "searchset" || len(b.Entry) != 3 {
		t.Fatalf("status %d, bundle %+v", status, b)
	}
	if !strings.Contains(string(body), m.Opts.Marker) {
		t.Fatal("the body does not carry the marker")
	}
	if got := m.LastRequest(); got.Path != "/fhir/Patient" || got.RawQuery != "name=x" {
		t.Fatalf("last request %+v", got)
	}
}

func TestAMemberAnswersItsStatusWithAnOperationOutcome(t *testing.T) {
	m := Start(t, Options{Knobs: double.Knobs{Status: 500}})
	status, body, err := get(t, context.Background(), m.URL+"/Patient")
	if err != nil {
		t.Fatal(err)
	}
	if status != 500 || !strings.Contains(string(body), "OperationOutcome") {
		t.Fatalf("status %d body %s", status, body)
	}
}

func TestARefusingMemberRefuses(t *testing.T) {
	m := Start(t, Options{Knobs: double.Knobs{Fault: double.FaultRefused}})
	_, _, err := get(t, context.Background(), m.URL+"/metadata")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want connection refused", err)
	}
}

func TestAResettingMemberBreaksOffItsBody(t *testing.T) {
	m := Start(t, Options{Knobs: double.Knobs{Fault: double.FaultReset}})
	status, _, err := get(t, context.Background(), m.URL+"/Patient")
	if err == nil || status != 200 {
		t.Fatalf("status %d err %v, want a 200 whose body breaks off", status, err)
	}
}

func TestAHangingMemberSeesItsCallerGiveUp(t *testing.T) {
	m := Start(t, Options{Knobs: double.Knobs{Fault: double.FaultHang}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := get(t, ctx, m.URL+"/Patient"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	select {
	case <-m.Cancelled():
	case <-time.After(2 * time.Second):
		t.Fatal("the member did not see the request cancelled")
	}
}

func TestServeStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Serve(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(t, context.Background(), m.URL+"/metadata"); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, _, err := get(t, context.Background(), m.URL+"/metadata")
		if errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member still answers after its context ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
