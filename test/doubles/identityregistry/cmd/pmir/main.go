// Command pmir runs the IHE PMIR Patient Identity Registry double (package pmir) until
// interrupted, for the end-to-end suite (as a pod, image ferrofed.local/pmir:e2e) and
// for trying [pmir] by hand:
//
//	go run ./test/doubles/identityregistry/cmd/pmir -listen 127.0.0.1:9301 -control 127.0.0.1:9302
//
// It prints the registry's FHIR base on stdout: -base when given (the address it is
// reached at, e.g. its Service's, which the Location of a created subscription names). The registry serves its own routes on
// -listen; a small control API, which no gateway calls, serves on -control so that a
// test outside the pod can drive and read it:
//
//	GET  /_double/state                     {"subscriptions": [{"id", "status", "criteria", "endpoint"}], "creates", "deletes"}
//	POST /_double/delete-hang?on=true|false every DELETE of a subscription hangs or not (test/double's FaultHang on DeleteRoute; off answers the held ones)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
)

// State is the answer of GET /_double/state.
type State struct {
	Subscriptions []Subscription `json:"subscriptions"`
	Creates       int            `json:"creates"`
	Deletes       int            `json:"deletes"`
}

// Subscription is one held subscription.
type Subscription struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Criteria string `json:"criteria"`
	Endpoint string `json:"endpoint"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address the registry listens on")
	control := flag.String("control", "127.0.0.1:0", "address the control API listens on")
	base := flag.String("base", "", "the FHIR base the registry is reached at, which its Location headers name (default http://<listen address>/fhir)")
	flag.Parse()
	reg, err := identityregistry.New(identityregistry.Options{Listen: *listen})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pmir:", err)
		os.Exit(1)
	}
	if *base != "" {
		// Behind a Service the listen address is not the origin the gateway asks:
		// a Location on it would be foreign to the gateway. Set before any request.
		reg.URL = strings.TrimSuffix(*base, "/")
	}
	ln, err := net.Listen("tcp", *control)
	if err != nil {
		reg.Close()
		fmt.Fprintln(os.Stderr, "pmir:", err)
		os.Exit(1)
	}
	fmt.Println(reg.URL)
	if err := double.ServeUntilSignal(ln, handler(reg), reg.Close); err != nil { // Close: a held delete ends unanswered
		fmt.Fprintln(os.Stderr, "pmir:", err)
		os.Exit(1)
	}
}

// handler serves the control API of reg.
func handler(reg *identityregistry.Server) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_double/state", func(w http.ResponseWriter, _ *http.Request) {
		out := State{Subscriptions: []Subscription{}, Creates: reg.Count(http.MethodPost, "/Subscription"), Deletes: reg.Count(http.MethodDelete, "/Subscription/")}
		for _, s := range reg.Subscriptions() {
			out.Subscriptions = append(out.Subscriptions, Subscription{ID: s.ID, Status: s.Status, Criteria: s.Criteria, Endpoint: s.Endpoint})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /_double/delete-hang", func(w http.ResponseWriter, r *http.Request) {
		on, err := strconv.ParseBool(r.URL.Query().Get("on"))
		if err != nil {
			http.Error(w, "want on=true|false", http.StatusBadRequest)
			return
		}
		k := double.Knobs{}
		if on {
			k = double.Knobs{Route: identityregistry.DeleteRoute, Fault: double.FaultHang}
		}
		if err := reg.SetKnobs(k); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
