package process

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// TestTwoProcessesOnOneStoredQueryStoreAnswerTheSameList runs two `ferrofed serve`
// processes on one [stored_queries] directory, as two replicas of a Gateway read one
// mounted ConfigMap (or a shared volume): what one stores, the other lists and runs,
// and both answer the same list; what one deletes, the other no longer lists.
func TestTwoProcessesOnOneStoredQueryStoreAnswerTheSameList(t *testing.T) {
	member := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	dir := t.TempDir()
	store := filepath.Join(dir, "stored-queries")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	jwks := clients.JWKS
	token := clients.Sign(t, "monitoring", issuer.OperatorScope)
	var bases []string
	for i := range 2 {
		port := freePort(t)
		path := filepath.Join(dir, fmt.Sprintf("ferrofed-%d.toml", i))
		writeFile(t, path, fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
termination_message_path = ""
[[registry.members]]
id = "a"
query_endpoint = %q
[[auth.issuers]]
issuer = "https://issuer.test"
audience = "ferrofed"
jwks_file = %q
operator_scope = "ferrofed.operator"
[stored_queries]
dir = %q
`, port, member.URL, jwks, store))
		g := serve(t, path)
		defer g.stop(t)
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", port))
	}
	do := func(method, url, token string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	// list is a process's list, the per-process drift left out.
	list := func(base string) string {
		t.Helper()
		status, body := do(http.MethodGet, base+"/operator/stored-queries", token, nil)
		var l struct {
			StoredQueries []struct {
				ID, Code, Resource, Digest string
			} `json:"stored_queries"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &l) != nil {
			t.Fatalf("list: %d %s", status, body)
		}
		b, _ := json.Marshal(l)
		return string(b)
	}
	same := func(what, want string) {
		t.Helper()
		// Each process reads the directory again within a second of a change.
		deadline := time.Now().Add(3 * time.Second)
		for {
			l0, l1 := list(bases[0]), list(bases[1])
			if l0 == l1 && bytes.Contains([]byte(l0), []byte(want)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the processes answer %s and %s", what, l0, l1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	def := func(id string) []byte {
		return []byte(fmt.Sprintf(`{"resourceType":"OperationDefinition","id":%q,"kind":"query","code":%q,"resource":["Observation"],`+
			`"parameter":[{"name":"patient","use":"in","min":1,"max":"1","type":"string"}],`+
			`"extension":[{"url":"https://ferrofed.io/fhir/StructureDefinition/stored-query-template","valueExpression":{"language":"application/x-fhir-query","expression":"Observation?subject=Patient/{{%%patient}}"}}]}`, id, id))
	}
	if status, body := do(http.MethodPut, bases[0]+"/operator/stored-queries/one", token, def("one")); status != http.StatusCreated {
		t.Fatalf("upload to the first: %d %s", status, body)
	}
	same("after an upload to the first", `"ID":"one"`)
	if status, body := do(http.MethodPut, bases[1]+"/operator/stored-queries/two", token, def("two")); status != http.StatusCreated {
		t.Fatalf("upload to the second: %d %s", status, body)
	}
	same("after an upload to the second", `"ID":"two"`)
	if status, body := do(http.MethodGet, bases[1]+"/fhir/Observation?_query=one&patient=a.p1", clientToken, nil); status != http.StatusOK {
		t.Fatalf("the second runs what the first stored: %d %s", status, body)
	}
	if status, _ := do(http.MethodDelete, bases[1]+"/operator/stored-queries/one", token, nil); status != http.StatusOK {
		t.Fatalf("delete on the second: %d", status)
	}
	same("after a delete on the second", `"ID":"two"`)
	if l := list(bases[0]); bytes.Contains([]byte(l), []byte(`"ID":"one"`)) {
		t.Fatalf("the first still lists the deleted query: %s", l)
	}
}
