package main

import (
	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
)

// The federation surface (data plane, operator routes, dependency report) is part of
// every gateway; its metrics reach the server's registry through server.Collected.
func init() {
	surfaceFactories = append(surfaceFactories, func(cfg *config.Config, log logr.Logger) (server.Surface, error) {
		return federation.New(cfg, federation.Options{Logger: log.WithName("federation")})
	})
}
