package main

import "github.com/edgelimit/edgelimit/coordinator"

func init() {
	commands["coordinator"] = command{
		summary: "run the Pebble-backed coordinator server",
		run:     coordinator.RunCLI,
	}
}
