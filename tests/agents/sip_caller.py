"""An agent that calls and gives up while it rings: `python sip_caller.py URI CANCEL_S`.

PJSIP (pjsua2) on 127.0.0.1: it sends an INVITE to URI, hangs up (CANCEL) CANCEL_S seconds later if nobody has
answered, and exits a second after that. A sip target's inbound `trigger` starts it.
"""

from __future__ import annotations

import sys
import time

import pjsua2 as pj


def main() -> None:
    uri, cancel_s = sys.argv[1], float(sys.argv[2])
    endpoint = pj.Endpoint()
    endpoint.libCreate()
    config = pj.EpConfig()
    config.uaConfig.threadCnt = 0
    config.uaConfig.mainThreadOnly = True
    config.logConfig.level = config.logConfig.consoleLevel = 0
    endpoint.libInit(config)
    transport = pj.TransportConfig()
    transport.boundAddress = "127.0.0.1"
    endpoint.transportCreate(pj.PJSIP_TRANSPORT_UDP, transport)
    endpoint.libStart()
    endpoint.audDevManager().setNullDev()
    account_config = pj.AccountConfig()
    account_config.idUri = "sip:agent@127.0.0.1"
    account_config.regConfig.registerOnAdd = False
    account = pj.Account()
    account.create(account_config)
    call = pj.Call(account)
    call.makeCall(uri, pj.CallOpParam(True))
    for seconds in (cancel_s, 1.0):
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            endpoint.libHandleEvents(10)
        if seconds == cancel_s:
            call.hangup(pj.CallOpParam(True))


if __name__ == "__main__":
    main()
