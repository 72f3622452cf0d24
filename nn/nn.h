// Umbrella header for the nn package.
#pragma once

#include "core/nn_ops.h"
#include "nn/activations.h"
#include "nn/container.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/packed_sequence.h"
#include "nn/rnn.h"
#include "nn/shape_layers.h"
#include "nn/state_dict.h"
#include "nn/transformer.h"
#include "nn/utils.h"
