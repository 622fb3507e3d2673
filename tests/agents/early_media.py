"""A phone agent that speaks before it answers (early media): `python early_media.py ANSWER_S WAV [CODEC]`.

It takes a call with 183 Session Progress and an SDP, plays WAV (pcm16 8 kHz mono) on that early media at once
(an announcement, as carriers and IVRs play before the answer), and answers with 200 OK `ANSWER_S` seconds after the
INVITE came. It is PJSIP (pjsua2) on 127.0.0.1 and a free UDP port; it prints `listening sip:agent@HOST:PORT`,
then `early T` and `answered T` (CLOCK_MONOTONIC seconds), and runs until it is ended. With CODEC (`G722`) it
takes calls in that codec only, as an agent that carries no G.711 does.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pjsua2 as pj


class Call(pj.Call):  # type: ignore[misc]  # pjsua2 ships no types
    def __init__(self, account: pj.Account, call_id: int, sound: Path) -> None:
        super().__init__(account, call_id)
        self.sound = sound
        self.player: pj.AudioMediaPlayer | None = None

    def onCallMediaState(self, prm: Any) -> None:
        info = self.getInfo()  # kept: its media vector dies with it
        for index, media in enumerate(info.media):
            if media.type == pj.PJMEDIA_TYPE_AUDIO and media.status == pj.PJSUA_CALL_MEDIA_ACTIVE \
                    and self.player is None:
                self.player = pj.AudioMediaPlayer()
                self.player.createPlayer(str(self.sound), pj.PJMEDIA_FILE_NO_LOOP)
                self.player.startTransmit(self.getAudioMedia(index))
                print(f"early {time.monotonic()}", flush=True)


class Account(pj.Account):  # type: ignore[misc]
    def __init__(self, sound: Path, answer_s: float) -> None:
        super().__init__()
        self.sound, self.answer_s = sound, answer_s
        self.calls: list[tuple[float, Call]] = []

    def onIncomingCall(self, prm: Any) -> None:
        call = Call(self, prm.callId, self.sound)
        progress = pj.CallOpParam()
        progress.statusCode = 183  # with the SDP: the early media
        call.answer(progress)
        self.calls.append((time.monotonic() + self.answer_s, call))


def main() -> None:
    answer_s, sound = float(sys.argv[1]), Path(sys.argv[2])
    endpoint = pj.Endpoint()
    endpoint.libCreate()
    config = pj.EpConfig()
    config.uaConfig.threadCnt = 0
    config.uaConfig.mainThreadOnly = True
    config.logConfig.level = config.logConfig.consoleLevel = 0
    endpoint.libInit(config)
    transport = pj.TransportConfig()
    transport.boundAddress = "127.0.0.1"
    transport_id = endpoint.transportCreate(pj.PJSIP_TRANSPORT_UDP, transport)
    endpoint.libStart()
    endpoint.audDevManager().setNullDev()
    if len(sys.argv) > 3:
        for codec in endpoint.codecEnum2():
            endpoint.codecSetPriority(codec.codecId, 255 if codec.codecId.startswith(sys.argv[3] + "/") else 0)
    account_config = pj.AccountConfig()
    account_config.idUri = "sip:agent@127.0.0.1"
    account_config.regConfig.registerOnAdd = False
    account = Account(sound, answer_s)
    account.create(account_config)
    print(f"listening sip:agent@{endpoint.transportGetInfo(transport_id).localName}", flush=True)
    while True:
        endpoint.libHandleEvents(10)
        for due, call in list(account.calls):
            if time.monotonic() >= due:
                account.calls.remove((due, call))
                answer = pj.CallOpParam()
                answer.statusCode = 200
                call.answer(answer)
                print(f"answered {time.monotonic()}", flush=True)


if __name__ == "__main__":
    main()
