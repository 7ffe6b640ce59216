// The generation settings both pages show: the token limit and the temperature (0 = greedy), as spin boxes.
#pragma once

#include <QDoubleSpinBox>
#include <QSpinBox>

namespace demo {

inline QSpinBox *make_token_limit_spin(QWidget *parent) {
    auto *spin = new QSpinBox(parent);
    spin->setRange(1, 100000);
    spin->setPrefix(QObject::tr("max "));
    spin->setSuffix(QObject::tr(" tokens"));
    return spin;
}

inline QDoubleSpinBox *make_temperature_spin(QWidget *parent) {
    auto *spin = new QDoubleSpinBox(parent);
    spin->setRange(0.0, 5.0);
    spin->setSingleStep(0.1);
    spin->setPrefix(QObject::tr("temperature "));
    spin->setToolTip(QObject::tr("0: greedy, the most likely token each time (what Compare checks token for token)"));
    return spin;
}

}  // namespace demo
