// Command fhirmember runs one test member node (package members) until interrupted,
// for the demo and for trying the gateway by hand:
//
//	go run ./test/doubles/members/fhirmember -listen 127.0.0.1:9101 -id node-a
//	go run ./test/doubles/members/fhirmember -listen 127.0.0.1:9102 -id node-b -delay 2s
//	go run ./test/doubles/members/fhirmember -listen 127.0.0.1:9103 -id node-c -status 500
//
// It prints the member's query_endpoint on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

func main() {
	var o members.Options
	var fault string
	flag.StringVar(&o.Listen, "listen", "127.0.0.1:0", "address to listen on")
	flag.StringVar(&o.ID, "id", "member", "member id, used in resource ids and the body marker")
	flag.DurationVar(&o.Knobs.Delay, "delay", 0, "wait this long before answering")
	flag.IntVar(&o.Knobs.Status, "status", 0, "status of every answer (>= 400 answers an OperationOutcome; 0: each answer's own)")
	flag.StringVar(&fault, "fault", "", "misbehave (test/double's faults): hang | reset | malformed (refused: just do not start it)")
	flag.IntVar(&o.Entries, "entries", 2, "resources of each type a search matches")
	flag.BoolVar(&o.NumericIDs, "numeric-ids", false, "resource ids 1, 2, 3… (they collide across members)")
	flag.StringVar(&o.Handling, "handling", "lenient", "unknown search parameters without Prefer: handling=: lenient | strict")
	flag.Parse()
	switch f := double.Fault(fault); f {
	case double.FaultNone, double.FaultHang, double.FaultReset, double.FaultMalformed:
		o.Knobs.Fault = f
	default:
		fmt.Fprintf(os.Stderr, "fhirmember: -fault %q is not one of hang, reset, malformed\n", fault)
		os.Exit(2)
	}
	s, err := members.New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fhirmember:", err)
		os.Exit(1)
	}
	fmt.Println(s.URL)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Wait(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fhirmember:", err)
		os.Exit(1)
	}
}
