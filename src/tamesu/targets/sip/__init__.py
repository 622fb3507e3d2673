"""The `sip` target: a phone call through a SIP user agent (PJSIP) that runs in a process of its own."""
