# Package the pynq-kv top (kv_top on a Zynq board, its Vitis wrapper kv_krnl on an Alveo card)
# as a Vivado IP with ipx::package_project.
#
#   vivado -mode batch -source package_ip.tcl -tclargs CONFIG.tcl
#
# CONFIG.tcl is written by hw/vivado/flow.py from overlays/<board>/manifest.json: the part, the
# top module, its sources, the VLNV (pynq_kv.pynq_driver.KV_ENGINE_VLNV, what PYNQ binds the
# driver to), the port names of the control interface, clock and reset, and every HDL parameter.
# The interfaces are declared explicitly (not left to inference), so every port of the top is
# in exactly one bus interface -- tests/test_vivado.py checks that against the Verilog.
# Output: the IP repository $cfg(ip_dir) (component.xml + sources).

source [lindex $argv 0]

set proj_dir [file join $cfg(build_dir) ip_project]
create_project -force kv_ip $proj_dir -part $cfg(part)
add_files -norecurse $cfg(sources)
set_property top $cfg(top) [current_fileset]
update_compile_order -fileset sources_1

ipx::package_project -root_dir $cfg(ip_dir) -vendor $cfg(vendor) -library $cfg(library) \
    -taxonomy /pynq-kv -import_files -set_current true -force
set core [ipx::current_core]
set_property name $cfg(name) $core
set_property version $cfg(version) $core
set_property display_name "pynq-kv key-value lookup engine ($cfg(top))" $core
set_property description "Exact-match hash table + wildcard rules + memcached/UDP Ethernet front-end, AXI4-Lite CSR" $core
set_property vendor_display_name "pynq-kv" $core
set_property company_url "https://github.com/pynq-kv/pynq-kv" $core
set_property supported_families {zynquplus Production virtexuplusHBM Production} $core

# Drop whatever the packager inferred from port names (interfaces and the AXI4-Lite memory
# map), then declare each interface explicitly.
foreach bif [ipx::get_bus_interfaces -of_objects $core] {
    ipx::remove_bus_interface [get_property NAME $bif] $core
}
foreach mm [ipx::get_memory_maps -of_objects $core] {
    ipx::remove_memory_map [get_property NAME $mm] $core
}

# add_interface NAME ABSTRACTION BUS MODE {LOGICAL physical ...}
proc add_interface {core name abstraction bus mode portmap} {
    set bif [ipx::add_bus_interface $name $core]
    set_property abstraction_type_vlnv $abstraction $bif
    set_property bus_type_vlnv $bus $bif
    set_property interface_mode $mode $bif
    foreach {logical physical} $portmap {
        set pm [ipx::add_port_map $logical $bif]
        set_property physical_name $physical $pm
    }
    return $bif
}

# AXI4-Lite slave: registers, mailbox and counters (docs/registers.md)
set axil_map {}
foreach sig {AWADDR AWPROT AWVALID AWREADY WDATA WSTRB WVALID WREADY BRESP BVALID BREADY
             ARADDR ARPROT ARVALID ARREADY RDATA RRESP RVALID RREADY} {
    lappend axil_map $sig "$cfg(axil)_[string tolower $sig]"
}
set axil [add_interface $core $cfg(axil) xilinx.com:interface:aximm_rtl:1.0 \
    xilinx.com:interface:aximm:1.0 slave $axil_map]
set_property value AXI4LITE [ipx::add_bus_parameter PROTOCOL $axil]

ipx::add_memory_map $cfg(axil) $core
set_property slave_memory_map_ref $cfg(axil) $axil
set block [ipx::add_address_block regs [ipx::get_memory_maps $cfg(axil) -of_objects $core]]
set_property range $cfg(addr_range) $block
set_property width 32 $block
set_property usage register $block

# AXI4-Stream: MAC receive (slave) and transmit (master), without FCS
foreach {name mode} {s_axis_rx slave m_axis_tx master} {
    set axis_map {}
    foreach sig {TDATA TKEEP TVALID TREADY TLAST TUSER} {
        lappend axis_map $sig "${name}_[string tolower $sig]"
    }
    add_interface $core $name xilinx.com:interface:axis_rtl:1.0 xilinx.com:interface:axis:1.0 \
        $mode $axis_map
}

# reset and clock (every interface is synchronous to the one clock)
set rst [add_interface $core $cfg(reset) xilinx.com:signal:reset_rtl:1.0 xilinx.com:signal:reset:1.0 \
    slave [list RST $cfg(reset)]]
set_property value $cfg(reset_polarity) [ipx::add_bus_parameter POLARITY $rst]
set clk [add_interface $core $cfg(clock) xilinx.com:signal:clock_rtl:1.0 xilinx.com:signal:clock:1.0 \
    slave [list CLK $cfg(clock)]]
set_property value $cfg(reset) [ipx::add_bus_parameter ASSOCIATED_RESET $clk]
ipx::associate_bus_interfaces -busif $cfg(axil) -clock $cfg(clock) $core
ipx::associate_bus_interfaces -busif s_axis_rx -clock $cfg(clock) $core
ipx::associate_bus_interfaces -busif m_axis_tx -clock $cfg(clock) $core

# Parameters: every HDL parameter of the top is a user parameter, its default the board's value.
# Vector parameters wider than 32 bits (HASH_SEED, CFG_MAC) are bit strings of their width.
foreach {name value width} $cfg(params) {
    set up [ipx::get_user_parameters $name -of_objects $core]
    set hp [ipx::get_hdl_parameters $name -of_objects $core]
    if {$up eq "" || $hp eq ""} {
        error "parameter $name of the manifest is not a parameter of $cfg(top)"
    }
    if {$width > 0} {
        set literal "0x$value"
        foreach obj [list $up $hp] {
            set_property value_format bitString $obj
            set_property value_bit_string_length $width $obj
            set_property value $literal $obj
        }
    } else {
        foreach obj [list $up $hp] {
            set_property value_format long $obj
            set_property value $value $obj
        }
    }
    set_property display_name $name $up
}

# A Vitis kernel: user-managed (no ap_ctrl protocol), the clock's frequency left to v++
if {$cfg(flow) eq "vitis"} {
    set_property sdx_kernel true $core
    set_property sdx_kernel_type rtl $core
    set_property vitis_drc {ctrl_protocol user_managed} $core
    set_property ipi_drc {ignore_freq_hz true} $core
}

ipx::create_xgui_files $core
ipx::update_checksums $core
ipx::check_integrity $core
ipx::save_core $core
close_project
puts "packaged $cfg(vendor):$cfg(library):$cfg(name):$cfg(version) ($cfg(top)) in $cfg(ip_dir)"
