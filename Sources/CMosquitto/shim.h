#ifndef IBEACON_CMOSQUITTO_SHIM_H
#define IBEACON_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
