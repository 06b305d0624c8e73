// Command auditrepo runs the audit record repository double (package auditrepo) until
// interrupted, for the end-to-end suite (as a pod, image ferrofed.local/audit-repo:e2e)
// and for trying [audit] by hand:
//
//	go run ./test/doubles/auditrepo/cmd/auditrepo -listen 127.0.0.1:9201
//
// It prints the repository's FHIR base on stdout. Besides the repository's own routes
// (POST /AuditEvent, batch POST /), it serves a small control API under /_double/, which
// no audit client calls, so that a test outside the pod can drive and read it. It sets
// test/double's knobs of the repository:
//
//	GET  /_double/received                   what it stored: {"requests", "held", "events": [{"id", "eventId", "queries", "batch"}]}
//	POST /_double/script?status=503&count=N  a script: the next N requests answer status (count 0 clears it)
//	POST /_double/hold?on=true|false         FaultHold: hold every request once its body is read (false releases the held ones)
//	POST /_double/retry-after?value=V        the Retry-After of the scripts set after it (empty for none)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
)

// Received is the answer of GET /_double/received.
type Received struct {
	Requests int             `json:"requests"`
	Held     int             `json:"held"`
	Events   []ReceivedEvent `json:"events"`
}

// ReceivedEvent is one stored AuditEvent, without its body.
type ReceivedEvent struct {
	ID      string   `json:"id"`
	EventID string   `json:"eventId"`
	Queries []string `json:"queries"`
	Batch   bool     `json:"batch"`
}

func main() {
	var o auditrepo.Options
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.StringVar(&o.PoisonMarker, "poison", "", "answer 422 to every AuditEvent containing this marker")
	flag.Parse()
	repo, err := auditrepo.NewHandler(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "auditrepo:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "auditrepo:", err)
		os.Exit(1)
	}
	fmt.Println("http://" + ln.Addr().String())
	if err := double.ServeUntilSignal(ln, handler(repo), repo.Close); err != nil { // Close: held requests go unanswered
		fmt.Fprintln(os.Stderr, "auditrepo:", err)
		os.Exit(1)
	}
}

// handler serves the control API under /_double/ and the repository everywhere else.
func handler(repo *auditrepo.Server) http.Handler {
	var mu sync.Mutex
	retryAfter := ""
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_double/received", func(w http.ResponseWriter, _ *http.Request) {
		out := Received{Requests: repo.Requests(), Held: repo.Held(), Events: []ReceivedEvent{}}
		for _, e := range repo.Received() {
			out.Events = append(out.Events, ReceivedEvent{ID: e.ID, EventID: e.EventID, Queries: e.Queries, Batch: e.Batch})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /_double/script", func(w http.ResponseWriter, r *http.Request) {
		status, err1 := strconv.Atoi(r.URL.Query().Get("status"))
		count, err2 := strconv.Atoi(r.URL.Query().Get("count"))
		if err1 != nil || err2 != nil || count < 0 || count > 1_000_000 || status < 100 || status > 599 {
			http.Error(w, "want status=100..599 and count=0..1000000", http.StatusBadRequest)
			return
		}
		mu.Lock()
		k := double.Knobs{Status: status, RetryAfter: retryAfter}
		mu.Unlock()
		if err := repo.ScriptTimes(k, count); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_double/hold", func(w http.ResponseWriter, r *http.Request) {
		on, err := strconv.ParseBool(r.URL.Query().Get("on"))
		if err != nil {
			http.Error(w, "want on=true|false", http.StatusBadRequest)
			return
		}
		k := double.Knobs{}
		if on {
			k.Fault = double.FaultHold
		}
		if err := repo.SetKnobs(k); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_double/retry-after", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		retryAfter = r.URL.Query().Get("value")
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("/", repo)
	return mux
}
