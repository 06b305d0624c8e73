package members

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func send(t *testing.T, method, url string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res.StatusCode, b.Bytes()
}

func TestTheOperationDefinitionStore(t *testing.T) {
	m := Start(t, Options{ID: "a", OperationDefinitions: true})
	od := []byte(`{"resourceType":"OperationDefinition","id":"q","url":"https://x/q","kind":"query","code":"q"}`)

	t.Run("the CapabilityStatement offers update of OperationDefinition only with the option", func(t *testing.T) {
		for _, tc := range []struct {
			m    *Server
			want bool
		}{{m, true}, {Start(t, Options{ID: "b"}), false}} {
			_, body, err := get(t, context.Background(), tc.m.URL+"/metadata")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(body), `"type":"OperationDefinition"`) && strings.Contains(string(body), `"code":"update"`); got != tc.want {
				t.Fatalf("%s offers it: %v, want %v", tc.m.Opts.ID, got, tc.want)
			}
		}
	})
	t.Run("a PUT creates, a second updates, a GET reads it back with meta", func(t *testing.T) {
		if status, _ := send(t, http.MethodPut, m.URL+"/OperationDefinition/q", od); status != http.StatusCreated {
			t.Fatalf("create: %d", status)
		}
		if status, _ := send(t, http.MethodPut, m.URL+"/OperationDefinition/q", od); status != http.StatusOK {
			t.Fatalf("update: %d", status)
		}
		status, body := send(t, http.MethodGet, m.URL+"/OperationDefinition/q", nil)
		var got map[string]any
		if status != http.StatusOK || json.Unmarshal(body, &got) != nil || got["code"] != "q" || got["meta"].(map[string]any)["versionId"] != "2" {
			t.Fatalf("read: %d %s", status, body)
		}
	})
	t.Run("a PUT of another id or of something else is a 400", func(t *testing.T) {
		if status, _ := send(t, http.MethodPut, m.URL+"/OperationDefinition/other", od); status != http.StatusBadRequest {
			t.Fatalf("%d", status)
		}
		if status, _ := send(t, http.MethodPut, m.URL+"/OperationDefinition/q", []byte(`{"resourceType":"Patient","id":"q"}`)); status != http.StatusBadRequest {
			t.Fatalf("%d", status)
		}
	})
	t.Run("a search by url finds it", func(t *testing.T) {
		_, body := send(t, http.MethodGet, m.URL+"/OperationDefinition?url=https://x/q", nil)
		if !strings.Contains(string(body), `"total":1`) {
			t.Fatalf("%s", body)
		}
	})
	t.Run("the tamper knob changes the copy, or deletes it", func(t *testing.T) {
		m.Tamper("q", func(od map[string]any) { od["code"] = "tampered" })
		if raw, _ := m.OperationDefinition("q"); !strings.Contains(string(raw), "tampered") {
			t.Fatalf("%s", raw)
		}
		m.Tamper("q", nil)
		if status, _ := send(t, http.MethodGet, m.URL+"/OperationDefinition/q", nil); status != http.StatusNotFound {
			t.Fatalf("%d", status)
		}
		if m.Tamper("q", nil) {
			t.Fatal("tampered with a copy that is not there")
		}
	})
	t.Run("a DELETE removes it", func(t *testing.T) {
		send(t, http.MethodPut, m.URL+"/OperationDefinition/q", od)
		if status, _ := send(t, http.MethodDelete, m.URL+"/OperationDefinition/q", nil); status != http.StatusNoContent {
			t.Fatalf("%d", status)
		}
		if status, _ := send(t, http.MethodDelete, m.URL+"/OperationDefinition/q", nil); status != http.StatusNotFound {
			t.Fatalf("%d", status)
		}
	})
}
