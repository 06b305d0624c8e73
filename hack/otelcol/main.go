// Command otelcol is the OpenTelemetry Collector the tests export the gateway's traces
// to (test/otelcol): a distribution of the collector's own Go modules with what those
// tests need and nothing else. hack/tools.sh builds it into bin/otelcol from this
// throwaway module (go.mod pins every collector module at one release), as no release
// binary can be downloaded here.
//
//	receivers:  otlp  (OTLP over HTTP and gRPC; the tests use HTTP)
//	processors: batch
//	exporters:  file  (contrib: what it receives, as OTLP JSON lines, to a file)
//	            debug (to the collector's log)
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// version is set by hack/tools.sh (-X main.version=…): the collector release.
var version = "dev"

func components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](batchprocessor.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory(), debugexporter.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	// What `otelcol components` names as each component's module.
	f.ReceiverModules = map[component.Type]string{otlpreceiver.NewFactory().Type(): "go.opentelemetry.io/collector/receiver/otlpreceiver"}
	f.ProcessorModules = map[component.Type]string{batchprocessor.NewFactory().Type(): "go.opentelemetry.io/collector/processor/batchprocessor"}
	f.ExporterModules = map[component.Type]string{
		fileexporter.NewFactory().Type():  "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter",
		debugexporter.NewFactory().Type(): "go.opentelemetry.io/collector/exporter/debugexporter",
	}
	return f, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "ferrofed's test OpenTelemetry Collector (otlp receiver; file and debug exporters)",
			Version:     version,
		},
		Factories: components,
		ProviderModules: map[string]string{
			fileprovider.NewFactory().Create(confmap.ProviderSettings{}).Scheme(): "go.opentelemetry.io/collector/confmap/provider/fileprovider",
			envprovider.NewFactory().Create(confmap.ProviderSettings{}).Scheme():  "go.opentelemetry.io/collector/confmap/provider/envprovider",
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
