package main

import "github.com/edgelimit/edgelimit/coordinator"

func init() {
	commands["coordinator"] = command{
		summary: "run the coordinator server (Pebble, or Redis Cluster with --store)",
		run:     coordinator.RunCLI,
	}
}
