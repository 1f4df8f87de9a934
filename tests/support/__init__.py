"""Helpers the test folders share: loopback servers, wire scripts, hypothesis strategies."""
