package main

import "github.com/sluice-db/sluice/internal/procstat"

// procCPU is a process's CPU seconds (procstat.ProcessCPU).
func procCPU(pid int) float64 { return procstat.ProcessCPU(pid) }
