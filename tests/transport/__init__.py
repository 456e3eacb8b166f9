"""Tests of the ZeroMQ transport (groupcomm.transport), most with real processes."""
